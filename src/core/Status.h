#pragma once
// Errors are values. A Status carries a code and a message that names what was
// wrong; front ends map the code to an HTTP status / gRPC code in one place.
#include <string>
#include <utility>
#include <variant>

namespace ortserve {

enum class StatusCode {
  kOk,
  kInvalidArgument,   // bad request content: HTTP 400, gRPC INVALID_ARGUMENT
  kNotFound,          // unknown model/version: HTTP 404, NOT_FOUND (as Triton)
  kUnavailable,       // overload, model not ready, shutting down: 503, UNAVAILABLE
  kUnsupported,       // unsupported encoding/feature: 501, UNIMPLEMENTED
  kDeadlineExceeded,  // request timeout expired: 504? Triton uses 400/UNAVAILABLE; see http mapping
  kCancelled,         // client went away
  kPayloadTooLarge,   // body or tensor over a configured limit: HTTP 400 (as Triton), gRPC RESOURCE_EXHAUSTED
  kInternal,          // a bug or a runtime failure: 500, INTERNAL
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status explaining why there is none (std::expected is C++23).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}     // NOLINT: must not be Ok
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

// Early return on error: ORTSERVE_RETURN_IF_ERROR(expr) for Status expressions.
#define ORTSERVE_RETURN_IF_ERROR(expr)        \
  do {                                        \
    ::ortserve::Status _st = (expr);          \
    if (!_st.ok()) return _st;                \
  } while (0)

}  // namespace ortserve
