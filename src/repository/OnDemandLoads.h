#pragma once
// On-demand loading (--model-load-on-demand): requests for a model that is
// listed but not loaded wait here for its load. The first waiter of a model
// starts the load; those arriving while it runs join it, so concurrent first
// requests cause one load. Every waiter is answered exactly once: with the
// load's status when it finishes, with kUnavailable when its deadline (its
// own, capped by --model-load-wait-secs) passes first, or with kUnavailable
// when the server stops. The load itself goes on after a waiter gave up.
//
// Back-off: after a load that failed for the model's own reasons (any error
// but kUnavailable, which a full memory budget and a stopping server answer),
// waiters of that model get the load's error at once, without a new load,
// for kFirstBackoff; each further failure in a row doubles that, up to
// kMaxBackoff, and a load that succeeds ends it. Forget(name) ends it too
// (an explicit or repository load of the model), as does a change of the
// model's files (`stamp`, looked at when a waiter arrives during it).
//
// Nothing here blocks the caller: `done` runs on the loader thread (the
// load's end), on this object's timer thread (a deadline) or on the caller's
// thread (refused at once). Thread-safe.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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

  // What identifies the files of `name` a load reads (ListedStamp, as
  // ListedModels keys its preparations); empty: no check.
  using Stamp = std::function<std::string(const std::string& name)>;
  // The clock of the back-off (tests); empty: Clock::now.
  using Now = std::function<Clock::time_point()>;
  static constexpr std::chrono::milliseconds kFirstBackoff = std::chrono::seconds(2);
  static constexpr std::chrono::milliseconds kMaxBackoff = std::chrono::seconds(60);

  OnDemandLoads(std::chrono::milliseconds max_wait, StartLoad start, Stamp stamp = {}, Now now = {});
  ~OnDemandLoads();  // Stop()

  // Joins the load of `name`, starting it when none runs; answers the failed
  // load's error at once during its back-off.
  void Wait(const std::string& name, Clock::time_point deadline, Done done) ORTSERVE_EXCLUDES(mu_);
  // Ends the back-off of `name`: its next waiter starts a load.
  void Forget(const std::string& name) ORTSERVE_EXCLUDES(mu_);
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
  struct Failure {
    Status status;  // the load's error, noting the back-off
    Clock::time_point until;
    std::chrono::milliseconds backoff;
    std::string stamp;
  };
  void Finished(const std::string& name, const Status& status) ORTSERVE_EXCLUDES(mu_);
  // The error to answer a waiter of `name` with at once; nullopt: none.
  std::optional<Status> BackingOff(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  void RecordFailureLocked(const std::string& name, const Status& status, std::string stamp)
      ORTSERVE_REQUIRES(mu_);
  void ExpireLoop() ORTSERVE_EXCLUDES(mu_);

  const std::chrono::milliseconds max_wait_;
  const StartLoad start_;
  const Stamp stamp_;
  const Now now_;
  Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Load> loads_ ORTSERVE_GUARDED_BY(mu_);  // the loads running
  std::map<std::string, Failure> failures_ ORTSERVE_GUARDED_BY(mu_);  // the last load failed
  Histogram cold_starts_ = Histogram::Durations();
  bool stopping_ ORTSERVE_GUARDED_BY(mu_) = false;
  std::thread timer_;  // last: starts once everything above exists
};

}  // namespace ortserve
