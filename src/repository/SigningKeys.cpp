#include "repository/SigningKeys.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "config/ModelFiles.h"

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

}  // namespace

Result<SigningKeys> SigningKeys::Load(const std::vector<std::string>& pem_files) {
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
  if (bundle.key_hint.empty() && !bundle.certificates.empty()) {
    return Unavailable("certificate-based signature: ortserve checks key-based signatures only "
                       "(--model-signing-public-key)");
  }
  const std::string message = DssePae(bundle.payload_type, bundle.payload);
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
