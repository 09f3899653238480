#pragma once
// Restricted APIs (--http-restricted-api / --grpc-restricted-protocol), with
// Triton's syntax: "<group>[,<group>...]:<key>=<value>", repeatable. A call
// to a restricted group must carry the header with exactly <value>: over HTTP
// the header <key>, over gRPC the metadata key "triton-grpc-protocol-<key>"
// (Triton's kRestrictedProtocolHeaderTemplate; its clients send that form).
// Groups not named by any spec are open.
//
// Secrets: the expected value is kept only as its SHA-256 digest, and a
// presented value is hashed and compared with CRYPTO_memcmp, so neither the
// position of the first wrong byte nor the expected length shows in the time
// a refusal takes. A refusal (RefusalMessage) names the header in Triton's
// words, never the value; a missing header and a wrong one also differ in the
// status code (HTTP 401/403, gRPC UNAUTHENTICATED/PERMISSION_DENIED).
//
// An AccessPolicy is immutable after Parse() and safe to share across threads.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"

namespace ortserve::auth {

enum class ApiGroup : uint8_t {
  kHealth,
  kMetadata,
  kInference,
  kSharedMemory,
  kModelConfig,
  kModelRepository,
  kStatistics,
  kTrace,
  kLogging,
};
inline constexpr size_t kApiGroupCount = 9;

// "health", "metadata", ... (the names the flags use).
std::string_view ApiGroupName(ApiGroup group);
std::optional<ApiGroup> ParseApiGroup(std::string_view name);

// Which front end a policy guards: its flag, the prefix of its header names
// and the words of its refusals follow Triton's.
enum class Protocol : uint8_t { kHttp, kGrpc };

// "triton-grpc-protocol-": what Triton puts before a gRPC restriction's key.
inline constexpr std::string_view kGrpcRestrictedKeyPrefix = "triton-grpc-protocol-";

// Explicit model control refuses load/unload unless the model-repository
// group is restricted (or --allow-unauthenticated-model-control=true); the
// reason, naming the front end's restriction flag.
inline std::string ModelControlNeedsAuthMessage(std::string_view restrict_flag) {
  return "model load/unload is refused without authentication: restrict the model-repository API with " +
         std::string(restrict_flag) +
         "=model-repository:<header>=<value>, or start ortserve with --allow-unauthenticated-model-control=true";
}

enum class Verdict : uint8_t {
  kAllowed,
  kMissing,  // the header is absent: HTTP 401, gRPC UNAUTHENTICATED
  kWrong,    // present with another value: HTTP 403, gRPC PERMISSION_DENIED
};

// The flag that sets `protocol`'s policy: "--http-restricted-api" or
// "--grpc-restricted-protocol".
std::string_view RestrictionFlag(Protocol protocol);

// Equality of two byte strings in time that depends only on their lengths
// (not on where they differ): both are hashed with SHA-256, and the digests
// compared with CRYPTO_memcmp.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

class AccessPolicy {
 public:
  struct Restriction {
    std::string header;  // lowercase; over gRPC with kGrpcRestrictedKeyPrefix
    std::array<unsigned char, 32> value_digest{};
  };

  // No restriction: every group open.
  AccessPolicy() = default;

  // Parses the specs of `protocol`'s flag (named in errors). Errors: empty
  // group list, unknown group (lists the valid ones), a group named twice,
  // missing ':' or '=', empty or invalid key, empty value.
  static Result<AccessPolicy> Parse(const std::vector<std::string>& specs, Protocol protocol);

  bool empty() const { return restrictions_.empty(); }
  bool restricted(ApiGroup group) const { return index_[static_cast<size_t>(group)] >= 0; }
  // The header a call to `group` must carry; nullptr when the group is open.
  const Restriction* RestrictionFor(ApiGroup group) const {
    const int i = index_[static_cast<size_t>(group)];
    return i < 0 ? nullptr : &restrictions_[static_cast<size_t>(i)];
  }
  // Distinct header names of all restrictions (what a front end must capture).
  std::vector<std::string> HeaderNames() const;

  // `presented`: the value of RestrictionFor(group)->header in the call, if any.
  Verdict Check(ApiGroup group, std::optional<std::string_view> presented) const;

  // Why a call to `group` was refused with `verdict` (not kAllowed): Triton's
  // words ("This API is restricted, expecting header '<key>'" over HTTP,
  // "This protocol is restricted, expecting header
  // 'triton-grpc-protocol-<key>'" over gRPC), then whether the header was
  // absent or held another value. Never the value.
  std::string RefusalMessage(ApiGroup group, Verdict verdict) const;

 private:
  Protocol protocol_ = Protocol::kHttp;
  std::vector<Restriction> restrictions_;
  std::array<int, kApiGroupCount> index_ = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
};

// Reads a PEM file named by `flag` and checks that it holds what `kind` says
// ("certificate": one or more X.509 certificates; "private key"). The error
// names the flag, the file and the reason.
enum class PemKind { kCertificate, kPrivateKey };
Result<std::string> ReadPemFile(const std::string& path, PemKind kind, std::string_view flag);
// Whether the first certificate of `cert_pem` holds the public half of `key_pem`.
bool PemKeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem);

}  // namespace ortserve::auth
