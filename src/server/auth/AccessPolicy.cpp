#include "server/auth/AccessPolicy.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include "core/Text.h"

namespace ortserve::auth {
namespace {

constexpr std::array<std::string_view, kApiGroupCount> kGroupNames = {
    "health",           "metadata",   "inference", "shared-memory", "model-config",
    "model-repository", "statistics", "trace",     "logging"};

std::array<unsigned char, 32> Digest(std::string_view s) {
  std::array<unsigned char, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}


std::string ValidGroups() {
  std::string out;
  for (std::string_view n : kGroupNames) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

// Header names usable both as HTTP header and as gRPC metadata key.
bool ValidHeaderName(std::string_view name) {
  if (name.empty() || name.starts_with("grpc-")) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

}  // namespace

std::string_view ApiGroupName(ApiGroup group) { return kGroupNames[static_cast<size_t>(group)]; }

std::optional<ApiGroup> ParseApiGroup(std::string_view name) {
  for (size_t i = 0; i < kGroupNames.size(); ++i)
    if (kGroupNames[i] == name) return static_cast<ApiGroup>(i);
  return std::nullopt;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const auto da = Digest(a), db = Digest(b);
  return CRYPTO_memcmp(da.data(), db.data(), da.size()) == 0;
}

std::string_view RestrictionFlag(Protocol protocol) {
  return protocol == Protocol::kGrpc ? "--grpc-restricted-protocol" : "--http-restricted-api";
}

Result<AccessPolicy> AccessPolicy::Parse(const std::vector<std::string>& specs, Protocol protocol) {
  AccessPolicy policy;
  policy.protocol_ = protocol;
  const std::string_view flag = RestrictionFlag(protocol);
  // Triton's word for a group in its startup errors: "api" over HTTP, "protocol" over gRPC.
  const std::string feature = protocol == Protocol::kGrpc ? "protocol" : "api";
  const std::string syntax = " (expected " + std::string(flag) + "=<group>[,<group>...]:<key>=<value>)";
  for (const std::string& spec : specs) {
    const size_t colon = spec.find(':');
    // Never echo the part after ':' (it holds the secret).
    const std::string where =
        colon == std::string::npos ? std::string(flag) : std::string(flag) + " '" + spec.substr(0, colon) + ":...'";
    if (colon == std::string::npos) return InvalidArgument(where + ": missing ':' after the API groups" + syntax);
    const std::string_view rest = std::string_view(spec).substr(colon + 1);
    const size_t eq = rest.find('=');
    if (eq == std::string_view::npos) return InvalidArgument(where + ": missing '=' between key and value" + syntax);
    std::string key(TrimBlanks(rest.substr(0, eq)));
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string_view value = rest.substr(eq + 1);
    if (!ValidHeaderName(key)) {
      return InvalidArgument(where + ": key '" + key +
                             "' is empty or invalid (letters, digits, '-', '_', '.'; not 'grpc-...')" + syntax);
    }
    const std::string header = protocol == Protocol::kGrpc ? std::string(kGrpcRestrictedKeyPrefix) + key : key;
    if (value.empty()) return InvalidArgument(where + ": the header value must not be empty" + syntax);

    const int index = static_cast<int>(policy.restrictions_.size());
    policy.restrictions_.push_back({header, Digest(value)});
    std::string_view groups = std::string_view(spec).substr(0, colon);
    bool any = false;
    while (true) {
      const size_t comma = groups.find(',');
      const std::string_view name = TrimBlanks(groups.substr(0, comma));
      if (!name.empty() || comma != std::string_view::npos) {
        const std::optional<ApiGroup> group = ParseApiGroup(name);
        if (!group) {
          return InvalidArgument("unknown restricted " + feature + " '" + std::string(name) + "' in " + where +
                                 " (valid: " + ValidGroups() + ")");
        }
        int& slot = policy.index_[static_cast<size_t>(*group)];
        if (slot >= 0) {
          return InvalidArgument("restricted " + feature + " '" + std::string(name) +
                                 "' can not be specified in multiple config groups (" + where +
                                 " names it again; each group takes one key)");
        }
        slot = index;
        any = true;
      }
      if (comma == std::string_view::npos) break;
      groups.remove_prefix(comma + 1);
    }
    if (!any) return InvalidArgument(where + ": no API group given" + syntax);
  }
  return policy;
}

std::vector<std::string> AccessPolicy::HeaderNames() const {
  std::vector<std::string> names;
  for (const Restriction& r : restrictions_) {
    bool seen = false;
    for (const std::string& n : names) seen = seen || n == r.header;
    if (!seen) names.push_back(r.header);
  }
  return names;
}

Verdict AccessPolicy::Check(ApiGroup group, std::optional<std::string_view> presented) const {
  const Restriction* r = RestrictionFor(group);
  if (!r) return Verdict::kAllowed;
  if (!presented) return Verdict::kMissing;
  const auto digest = Digest(*presented);
  return CRYPTO_memcmp(digest.data(), r->value_digest.data(), digest.size()) == 0 ? Verdict::kAllowed
                                                                                   : Verdict::kWrong;
}

std::string AccessPolicy::RefusalMessage(ApiGroup group, Verdict verdict) const {
  const Restriction* r = RestrictionFor(group);
  const std::string header = r ? r->header : std::string();
  std::string message = protocol_ == Protocol::kGrpc ? "This protocol is restricted, expecting header '"
                                                     : "This API is restricted, expecting header '";
  message += header;
  message += verdict == Verdict::kMissing ? "'; the request does not carry it"
                                          : "'; the request carries it with another value";
  return message;
}

Result<std::string> ReadPemFile(const std::string& path, PemKind kind, std::string_view flag) {
  const std::string what = kind == PemKind::kCertificate ? "certificate" : "private key";
  const std::string where = std::string(flag) + " file '" + path + "'";
  if (path.empty()) return InvalidArgument(std::string(flag) + " is required (a PEM " + what + " file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read " + where + ": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string pem = buffer.str();
  ERR_clear_error();
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                               &BIO_free);
  if (!bio) return Internal("out of memory reading " + where);
  if (kind == PemKind::kCertificate) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (!cert) return InvalidArgument(where + " is not a PEM certificate: " + OpenSslError());
    X509_free(cert);
  } else {
    EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
    if (!key) return InvalidArgument(where + " is not an unencrypted PEM private key: " + OpenSslError());
    EVP_PKEY_free(key);
  }
  return pem;
}

bool PemKeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size())), &BIO_free);
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())),
                                                    &BIO_free);
  if (!cert_bio || !key_bio) return false;
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  const bool match = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  return match;
}

}  // namespace ortserve::auth
