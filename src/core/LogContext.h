#pragma once
// The request a thread is working on, for the server log's JSON format
// (--log-format=json): a line logged while a LogScope is alive on its thread
// carries the request's model, version, id and, when it is traced, its trace
// and span id. The text formats ignore it. The views must outlive the scope.
#include <string_view>

namespace ortserve {

struct LogContext {
  std::string_view model;
  std::string_view version;
  std::string_view request_id;
  std::string_view trace_id;  // 32 lowercase hex digits; empty: not traced
  std::string_view span_id;   // the request span, 16 hex digits
};

// The innermost scope's context on this thread; null outside any.
inline const LogContext*& CurrentLogContextSlot() {
  thread_local const LogContext* current = nullptr;
  return current;
}
inline const LogContext* CurrentLogContext() { return CurrentLogContextSlot(); }

// Installs `context` for this thread until destroyed (scopes nest).
class LogScope {
 public:
  explicit LogScope(const LogContext& context) : previous_(CurrentLogContextSlot()) {
    CurrentLogContextSlot() = &context;
  }
  ~LogScope() { CurrentLogContextSlot() = previous_; }
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  const LogContext* previous_;
};

}  // namespace ortserve
