#pragma once
// The request a thread is working on, for the server log's JSON format
// (--log-format=json): a line logged while a LogScope is alive on its thread
// carries the request's model, version, id and, when it is traced, its trace
// and span id. The text formats ignore it.
//
// Two scopes:
//   LogScope         installs a LogContext whose views the caller keeps
//                    alive for the scope's life (a record being reported).
//   RequestLogScope  for a front end or worker handling a request whose
//                    strings may go away while the scope lives (the request
//                    is handed to another thread): it copies them into
//                    per-thread buffers that keep their capacity, so it
//                    allocates nothing once a thread has seen its longest
//                    names. It does nothing (one relaxed atomic load) while
//                    no log format reads the context (RequestLogFieldsWanted).
#include <array>
#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/Trace.h"

namespace ortserve {

struct LogContext {
  std::string_view model;
  std::string_view version;
  std::string_view request_id;
  TraceId trace_id;  // all zero: not traced
  SpanId span_id;    // the request span
  bool traced() const { return trace_id.valid(); }
};

// The innermost scope's context on this thread; null outside any.
inline const LogContext*& CurrentLogContextSlot() {
  thread_local const LogContext* current = nullptr;
  return current;
}
inline const LogContext* CurrentLogContext() { return CurrentLogContextSlot(); }

// Installs `context` for this thread until destroyed (scopes nest). The
// context and what its views show must outlive the scope.
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

// Whether the log's format writes the context (the JSON format); set by the
// log control when the format changes. A request that started while it was
// off carries no fields on lines it logs after it is switched on.
inline std::atomic<bool>& RequestLogFieldsWanted() {
  static std::atomic<bool> wanted{false};
  return wanted;
}

// See the file comment. Nests up to kMaxDepth deep on a thread; a deeper
// one leaves the enclosing context in place.
class RequestLogScope {
 public:
  static constexpr size_t kMaxDepth = 4;

  RequestLogScope(std::string_view model, std::string_view version, std::string_view request_id,
                  const RequestTrace* trace = nullptr) {
    if (!RequestLogFieldsWanted().load(std::memory_order_relaxed)) return;
    size_t& depth = Depth();
    if (depth >= kMaxDepth) return;
    Buffers& buffers = BuffersAt(depth++);
    buffers.model.assign(model);
    buffers.version.assign(version);
    buffers.request_id.assign(request_id);
    context_.model = buffers.model;
    context_.version = buffers.version;
    context_.request_id = buffers.request_id;
    if (trace != nullptr) {
      context_.trace_id = trace->trace_id;
      context_.span_id = trace->span_id;
    }
    previous_ = CurrentLogContextSlot();
    CurrentLogContextSlot() = &context_;
    installed_ = true;
  }
  ~RequestLogScope() {
    if (!installed_) return;
    CurrentLogContextSlot() = previous_;
    --Depth();
  }
  RequestLogScope(const RequestLogScope&) = delete;
  RequestLogScope& operator=(const RequestLogScope&) = delete;

 private:
  struct Buffers {
    std::string model, version, request_id;
  };
  static size_t& Depth() {
    thread_local size_t depth = 0;
    return depth;
  }
  static Buffers& BuffersAt(size_t depth) {
    thread_local std::array<Buffers, kMaxDepth> buffers;
    return buffers[depth];
  }

  LogContext context_;
  const LogContext* previous_ = nullptr;
  bool installed_ = false;
};

}  // namespace ortserve
