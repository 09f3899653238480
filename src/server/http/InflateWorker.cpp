#include "server/http/InflateWorker.h"

#include <utility>
#include <vector>

#include "core/ThreadName.h"

namespace ortserve::http {

InflateWorker::InflateWorker() : thread_([this] { Loop(); }) {}

InflateWorker::~InflateWorker() { Stop(); }

void InflateWorker::Submit(CancelFlag cancelled, std::function<void()> task) {
  std::vector<Task> dropped;  // destroyed outside the lock: their closures may own anything
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      if (it->Dropped()) {
        dropped.push_back(std::move(*it));
        it = tasks_.erase(it);
      } else {
        ++it;
      }
    }
    tasks_.push_back({std::move(cancelled), std::move(task)});
  }
  wake_.notify_one();
}

void InflateWorker::Stop() {
  std::deque<Task> dropped;  // destroyed last, outside the lock
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(tasks_);
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void InflateWorker::Loop() {
  SetCurrentThreadName("http-inflate");
  while (true) {
    Task task;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    if (!task.Dropped()) task.run();
  }
}

}  // namespace ortserve::http
