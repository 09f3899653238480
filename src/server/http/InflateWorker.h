#pragma once
// The thread that inflates (and decodes) large compressed request bodies off
// the HTTP I/O threads. Internal to src/server/http.
//
// A compressed body is inflated on its connection's I/O thread only up to a
// small output budget (HttpService: kInlineInflateBytes); a body that inflates
// to more, a gzip bomb among them, is finished here, so that it delays no
// other connection of that I/O thread. Tasks run one at a time in arrival
// order. The queue needs no bound of its own: a connection has at most one
// request in the service, and the tasks of connections that closed (their
// cancel flag set) are dropped when the next task comes, so it holds about
// one task per open connection (--http-max-connections), each with a body
// that was read and counted already.
//
// Threads: one, "http-inflate", from construction to Stop().
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/Cancellation.h"

namespace ortserve::http {

class InflateWorker {
 public:
  InflateWorker();
  ~InflateWorker();  // Stop()
  InflateWorker(const InflateWorker&) = delete;
  InflateWorker& operator=(const InflateWorker&) = delete;

  // Any thread. `task` runs on the worker unless `cancelled` is set first;
  // after Stop() it is dropped unrun.
  void Submit(CancelFlag cancelled, std::function<void()> task);
  // Lets the running task finish, drops the queued ones unrun and joins the
  // thread. Idempotent; not from the worker's own thread.
  void Stop();

 private:
  struct Task {
    CancelFlag cancelled;
    std::function<void()> run;
    bool Dropped() const { return cancelled && cancelled->IsCancelled(); }
  };
  void Loop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;  // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::thread thread_;      // last: starts once the rest exists
};

}  // namespace ortserve::http
