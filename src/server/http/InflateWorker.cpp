#include "server/http/InflateWorker.h"

#include <utility>

#include "core/ThreadName.h"

namespace ortserve::http {

InflateWorker::InflateWorker() : thread_([this] { Loop(); }) {}

InflateWorker::~InflateWorker() { Stop(); }

void InflateWorker::Submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void InflateWorker::Stop() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    dropped.swap(tasks_);
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  // `dropped` goes here, outside the lock: its closures may own anything.
}

void InflateWorker::Loop() {
  SetCurrentThreadName("http-inflate");
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace ortserve::http
