#include "repository/SigningKeys.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <ctime>

#include "config/ModelFiles.h"
#include "runtime/Sha256.h"

namespace ortserve {
namespace {

// The digest ECDSA signs with for the key's curve (as model-signing picks
// it); nullptr for Ed25519, which hashes itself.
Result<const EVP_MD*> DigestFor(EVP_PKEY* key) {
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_ED25519:
      return static_cast<const EVP_MD*>(nullptr);
    case EVP_PKEY_EC:
      switch (EVP_PKEY_get_bits(key)) {
        case 256: return EVP_sha256();
        case 384: return EVP_sha384();
        case 521: return EVP_sha512();
        default: break;
      }
      break;
    default:
      break;
  }
  return InvalidArgument("not an ECDSA P-256/P-384/P-521 or Ed25519 public key");
}

// model-signing's key hint: SHA-256 of the key's PEM SubjectPublicKeyInfo.
std::string KeyHint(EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
  PEM_write_bio_PUBKEY(bio.get(), key);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return Sha256Hex(std::string_view(data, static_cast<size_t>(n)));
}

bool VerifyWith(EVP_PKEY* key, const std::string& signature, const std::string& message) {
  auto md = DigestFor(key);
  if (!md.ok()) return false;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, md.value(), nullptr, key) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                          reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
}

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;

X509Ptr ParseDer(const std::string& der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  return X509Ptr(d2i_X509(nullptr, &p, static_cast<long>(der.size())), &X509_free);
}

// Every certificate in the PEM files, trusted.
Result<std::shared_ptr<X509_STORE>> LoadTrustStore(const std::vector<std::string>& files) {
  std::shared_ptr<X509_STORE> store(X509_STORE_new(), &X509_STORE_free);
  for (const std::string& file : files) {
    auto text = ReadFile(file);
    if (!text.ok()) return InvalidArgument("--model-signing-certificate-chain: " + text.status().message());
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(text->data(), static_cast<int>(text->size())),
                                                  &BIO_free);
    int count = 0;
    while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(store.get(), cert);
      X509_free(cert);
      ++count;
    }
    if (count == 0) return InvalidArgument("--model-signing-certificate-chain " + file + ": no PEM certificate");
  }
  return store;
}

// Whether the signing certificate may sign: KeyUsage digitalSignature, or
// ExtendedKeyUsage codeSigning (model-signing's rule).
bool MaySign(X509* cert) {
  const uint32_t usage = X509_get_key_usage(cert);
  const uint32_t extended = X509_get_extended_key_usage(cert);
  return (usage != UINT32_MAX && (usage & KU_DIGITAL_SIGNATURE) != 0) ||
         (extended != UINT32_MAX && (extended & XKU_CODE_SIGN) != 0);
}

}  // namespace

Status SigningKeys::VerifyCertificateBased(const SigningBundle& bundle, const std::string& message) const {
  if (store_ == nullptr) {
    return Unavailable("certificate-based signature: no --model-signing-certificate-chain to check it with");
  }
  X509Ptr leaf = ParseDer(bundle.certificates.front());
  if (leaf == nullptr) return Unavailable("the signing certificate is not a DER X.509 certificate");
  std::unique_ptr<STACK_OF(X509), void (*)(STACK_OF(X509)*)> chain(
      sk_X509_new_null(), [](STACK_OF(X509)* s) { sk_X509_pop_free(s, X509_free); });
  for (size_t i = 1; i < bundle.certificates.size(); ++i) {
    X509Ptr cert = ParseDer(bundle.certificates[i]);
    if (cert == nullptr) return Unavailable("certificate " + std::to_string(i) + " of the chain is not DER X.509");
    sk_X509_push(chain.get(), cert.release());
  }
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(), &X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store_.get(), leaf.get(), chain.get());
  struct tm not_before {};
  if (ASN1_TIME_to_tm(X509_get0_notBefore(leaf.get()), &not_before) != 1) {
    return Unavailable("the signing certificate has an unreadable notBefore");
  }
  X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx.get()), timegm(&not_before));
  if (X509_verify_cert(ctx.get()) != 1) {
    return Unavailable(std::string("certificate chain does not verify against --model-signing-certificate-chain: ") +
                       X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())));
  }
  if (!MaySign(leaf.get())) {
    return Unavailable("the signing certificate allows neither digital signatures nor code signing");
  }
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(X509_get_pubkey(leaf.get()), &EVP_PKEY_free);
  if (key == nullptr || !VerifyWith(key.get(), bundle.signatures.front(), message)) {
    return Unavailable("bad signature: the DSSE signature does not verify with the signing certificate's key");
  }
  return Status::Ok();
}

Result<SigningKeys> SigningKeys::Load(const std::vector<std::string>& pem_files,
                                      const std::vector<std::string>& certificate_chain_files) {
  SigningKeys keys;
  for (const std::string& file : pem_files) {
    auto text = ReadFile(file);
    if (!text.ok()) return InvalidArgument("--model-signing-public-key: " + text.status().message());
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(text->data(), static_cast<int>(text->size())),
                                                  &BIO_free);
    EVP_PKEY* raw = PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
    if (raw == nullptr) return InvalidArgument("--model-signing-public-key " + file + ": no PEM public key");
    std::shared_ptr<evp_pkey_st> key(raw, &EVP_PKEY_free);
    if (auto md = DigestFor(raw); !md.ok()) {
      return InvalidArgument("--model-signing-public-key " + file + ": " + md.status().message());
    }
    keys.keys_.push_back({file, KeyHint(raw), std::move(key)});
  }
  if (!certificate_chain_files.empty()) {
    auto store = LoadTrustStore(certificate_chain_files);
    if (!store.ok()) return store.status();
    keys.store_ = std::move(store).value();
  }
  return keys;
}

Status SigningKeys::Verify(const SigningBundle& bundle) const {
  if (!bundle.media_type.starts_with("application/vnd.dev.sigstore.bundle")) {
    return Unavailable("not a Sigstore bundle (mediaType '" + bundle.media_type + "')");
  }
  if (bundle.payload_type != kInTotoPayloadType) {
    return Unavailable("payload type is '" + bundle.payload_type + "', expected '" +
                       std::string(kInTotoPayloadType) + "'");
  }
  const std::string message = DssePae(bundle.payload_type, bundle.payload);
  if (bundle.key_hint.empty() && !bundle.certificates.empty()) return VerifyCertificateBased(bundle, message);
  bool hinted = false;
  for (const Key& key : keys_) {
    if (!bundle.key_hint.empty() && key.hint != bundle.key_hint) continue;
    hinted = true;
    if (VerifyWith(key.pkey.get(), bundle.signatures.front(), message)) return Status::Ok();
  }
  if (!hinted) {
    return Unavailable("signed by an unknown key (hint " + bundle.key_hint +
                       "): none of the --model-signing-public-key keys");
  }
  return Unavailable("bad signature: the DSSE signature does not verify with the public key");
}

}  // namespace ortserve
