#pragma once
// Deadlines and cancellation that reach into a running batch. One watchdog
// thread per dynamic batcher knows each worker's running batch (per request:
// its deadline and cancel token). When every request of a running batch is
// dead -- its deadline passed, or it was cancelled -- it marks the batch
// terminated and calls the instance's Terminate(); the worker, seeing the
// mark in Unwatch, answers each request as the queue would have. A batch
// with one live request is never terminated; a batch with a request that
// can neither expire nor be cancelled is not even watched.
//
// It never polls: it sleeps until the earliest moment a watched batch could
// die (its latest live deadline) or until a request anywhere is cancelled
// (core/Cancellation.h wakes it). A starting batch wakes it only if it would
// otherwise sleep past the batch's latest deadline, so a batch of requests
// that can only be cancelled (HTTP and gRPC requests without a timeout)
// costs no wake-up at all (docs/decisions.md, "Cancellation wakes the
// watchdog; nothing polls").
//
// Per batcher rather than per process: it uses the batcher's clock (tests
// drive it with a fake one) and must stop before the instances it terminates
// are destroyed; it costs one sleeping thread per model version, started by
// the first batch that can die, so a version that never ran one (an idle
// model among many) has none. A
// Terminate() that lands just before Run() starts or after it returns does
// nothing to the instance (ModelInstance); the worker still answers by the
// mark, so a batch found dead is never answered as a success.
//
// Thread safety: Watch/Unwatch for slot i only from worker i; Abandon and
// Stop from the batcher's Shutdown; the watchdog's lock is never held while
// an instance runs.
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "core/Cancellation.h"
#include "core/Mutex.h"
#include "runtime/ModelInstance.h"
#include "scheduler/RequestQueue.h"
#include "scheduler/SchedulerClock.h"

namespace ortserve {

class RunWatchdog {
 public:
  // How a watched run ended.
  enum class RunEnd { kRan, kDead, kAbandoned };

  // One slot per instance. The thread ("watch-<model>") starts with the
  // first watched batch. The instances and the clock must outlive Stop().
  RunWatchdog(const std::string& model_name, std::vector<ModelInstance*> instances, SchedulerClock* clock);
  ~RunWatchdog();  // Stop()

  // Registers slot `index`'s batch as running (watched if it can ever die;
  // the first watched batch starts the thread). False when shutdown has
  // abandoned the work: the batch must not start.
  bool Watch(size_t index, const std::vector<QueuedRequest>& batch) ORTSERVE_EXCLUDES(mu_);
  // Ends the registration and says whether the run was stopped, and why.
  RunEnd Unwatch(size_t index) ORTSERVE_EXCLUDES(mu_);
  // Shutdown past its deadline: every running batch is stopped, and a batch
  // about to start is refused by Watch.
  void Abandon() ORTSERVE_EXCLUDES(mu_);
  // Joins the thread. Idempotent; after the workers are joined.
  void Stop() ORTSERVE_EXCLUDES(mu_);

 private:
  struct WatchedRequest {
    Clock::time_point deadline;    // max: none
    const CancelToken* cancelled;  // null: cannot be cancelled
  };
  struct RunningBatch {
    bool active = false;      // a batch is (about to be) running
    bool watched = false;     // every request can die: the watchdog looks at it
    bool terminated = false;  // found dead (or abandoned at shutdown) and terminated
    std::vector<WatchedRequest> requests;
    // What the watchdog looks at: running, able to die, not stopped yet.
    bool Watchable() const { return active && watched && !terminated; }
    // The batch dies when this passes: the latest deadline among its requests
    // not cancelled (min, i.e. already, when every one was cancelled).
    Clock::time_point LastLiveDeadline() const;
  };

  void Loop() ORTSERVE_EXCLUDES(mu_);
  // A request was cancelled somewhere: look again if anything could die.
  void Wake() ORTSERVE_EXCLUDES(mu_);

  const std::string model_name_;
  const std::vector<ModelInstance*> instances_;
  SchedulerClock* const clock_;

  Mutex mu_;
  std::condition_variable cv_;
  std::vector<RunningBatch> running_ ORTSERVE_GUARDED_BY(mu_);  // one per instance
  bool stopping_ ORTSERVE_GUARDED_BY(mu_) = false;
  bool abandoned_ ORTSERVE_GUARDED_BY(mu_) = false;
  // When the sleeping thread looks next (max: only when woken); min while it
  // is awake, so that a batch registered then is seen before it sleeps.
  Clock::time_point wake_at_ ORTSERVE_GUARDED_BY(mu_) = Clock::time_point::max();
  // After the state it wakes the thread for: gone before it while destroying.
  CancelSubscription cancel_subscription_{[this] { Wake(); }};
  std::thread thread_ ORTSERVE_GUARDED_BY(mu_);  // none until a batch is watched
};

}  // namespace ortserve
