#pragma once
// Whether the calling thread lets a scheduler run a cheap model's batch on it
// inside Submit (an inline run: no hand-off to the model's worker, no
// wake-up). Off unless a thread opts in for its lifetime (the HTTP I/O
// threads, whose completions are queued, not run, on their own thread).
// Another thread's caller may hold locks its completion callbacks take, so
// the default is off. While an inline run answers its requests, the thread
// is switched off again: a completion that submits elsewhere never nests a
// second inline run.
namespace ortserve {

namespace detail {
inline thread_local bool inline_runs_allowed = false;
}  // namespace detail

inline bool InlineRunsAllowed() { return detail::inline_runs_allowed; }

// Sets the calling thread's permission for a scope, then restores it.
class InlineRunsScope {
 public:
  explicit InlineRunsScope(bool allowed) : previous_(detail::inline_runs_allowed) {
    detail::inline_runs_allowed = allowed;
  }
  ~InlineRunsScope() { detail::inline_runs_allowed = previous_; }
  InlineRunsScope(const InlineRunsScope&) = delete;
  InlineRunsScope& operator=(const InlineRunsScope&) = delete;

 private:
  const bool previous_;
};

}  // namespace ortserve
