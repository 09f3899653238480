#pragma once
// Whether the calling thread lets a scheduler run a cheap model's batch on it
// inside Submit (an inline run: no hand-off to the model's worker, no
// wake-up). Off unless a thread opts in (the HTTP I/O threads, whose
// completions are queued, not run, on their own thread; another thread's
// caller may hold locks its completion callbacks take), and then only while
// the thread serves at most one client connection: with more, the hand-off
// lets the model's worker compute one request while this thread reads and
// writes the others, which is worth more than the wake-up it costs
// (bench/FINDINGS.md, "tiny: where a request's time goes"). While an inline
// run answers its requests the thread is switched off again, so a completion
// that submits elsewhere never nests a second inline run.
#include <atomic>

namespace ortserve {

namespace detail {
// The opted-in thread's count of open client connections; null: off.
inline thread_local const std::atomic<int>* inline_runs_connections = nullptr;
}  // namespace detail

inline bool InlineRunsAllowed() {
  const std::atomic<int>* connections = detail::inline_runs_connections;
  return connections != nullptr && connections->load(std::memory_order_relaxed) <= 1;
}

// Sets the calling thread's permission for a scope, then restores it:
// `connections`, the thread's open client connections (it must outlive the
// scope), or null for none.
class InlineRunsScope {
 public:
  explicit InlineRunsScope(const std::atomic<int>* connections) : previous_(detail::inline_runs_connections) {
    detail::inline_runs_connections = connections;
  }
  ~InlineRunsScope() { detail::inline_runs_connections = previous_; }
  InlineRunsScope(const InlineRunsScope&) = delete;
  InlineRunsScope& operator=(const InlineRunsScope&) = delete;

 private:
  const std::atomic<int>* const previous_;
};

}  // namespace ortserve
