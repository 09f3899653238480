#pragma once
// On-demand loading (--model-load-on-demand): requests for a model that is
// listed but not loaded wait here for its load. The first waiter of a model
// starts the load; those arriving while it runs join it, so concurrent first
// requests cause one load. Every waiter is answered exactly once: with the
// load's status when it finishes, with kUnavailable when its deadline (its
// own, capped by --model-load-wait-secs) passes first, or with kUnavailable
// when the server stops. The load itself goes on after a waiter gave up.
//
// Nothing here blocks the caller: `done` runs on the loader thread (the
// load's end), on this object's timer thread (a deadline) or on the caller's
// thread (refused at once). Thread-safe.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/Histogram.h"
#include "core/InferenceRequest.h"
#include "core/Mutex.h"
#include "core/Status.h"

namespace ortserve {

class OnDemandLoads {
 public:
  using Done = std::function<void(Status)>;
  // Queues the load of `name`; `finished` is called exactly once when it is
  // over (OK: the model has a READY version).
  using StartLoad = std::function<void(const std::string& name, Done finished)>;

  OnDemandLoads(std::chrono::milliseconds max_wait, StartLoad start);
  ~OnDemandLoads();  // Stop()

  // Joins the load of `name`, starting it when none runs.
  void Wait(const std::string& name, Clock::time_point deadline, Done done) ORTSERVE_EXCLUDES(mu_);
  // Answers every waiter with kUnavailable and refuses new ones. Idempotent.
  void Stop() ORTSERVE_EXCLUDES(mu_);
  // Cold starts: from the first waiter of a load until the load succeeded, ns.
  Histogram::Snapshot ColdStarts() const { return cold_starts_.Read(); }

 private:
  struct Waiter {
    Clock::time_point deadline;
    Done done;
  };
  struct Load {
    Clock::time_point started;
    std::vector<Waiter> waiters;
  };
  void Finished(const std::string& name, const Status& status) ORTSERVE_EXCLUDES(mu_);
  void ExpireLoop() ORTSERVE_EXCLUDES(mu_);

  const std::chrono::milliseconds max_wait_;
  const StartLoad start_;
  Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Load> loads_ ORTSERVE_GUARDED_BY(mu_);  // the loads running
  Histogram cold_starts_ = Histogram::Durations();
  bool stopping_ ORTSERVE_GUARDED_BY(mu_) = false;
  std::thread timer_;  // last: starts once everything above exists
};

}  // namespace ortserve
