#include "scheduler/RequestQueue.h"

#include <algorithm>
#include <chrono>

namespace ortserve {

RequestQueue::RequestQueue(std::string label, std::vector<QueuePolicy> level_policies,
                           uint64_t default_max_queue_size)
    : label_(std::move(label)),
      policies_(std::move(level_policies)),
      default_max_queue_size_(default_max_queue_size) {
  if (policies_.empty()) policies_.emplace_back();
}

uint64_t RequestQueue::MaxSize(uint32_t level) const {
  const uint64_t configured = policies_[level - 1].max_queue_size;
  return configured != 0 ? configured : default_max_queue_size_;
}

uint64_t RequestQueue::EffectiveTimeoutUs(const InferenceRequest& request, const QueuePolicy& policy) {
  // Triton: a request may shorten the default timeout but never lengthen it;
  // with no default, the request's own timeout applies.
  uint64_t timeout_us = policy.default_timeout_us;
  if (policy.allow_timeout_override && request.timeout_us != 0 &&
      (timeout_us == 0 || request.timeout_us < timeout_us)) {
    timeout_us = request.timeout_us;
  }
  return timeout_us;
}

Clock::time_point RequestQueue::Deadline(const InferenceRequest& request,
                                         const QueuePolicy& policy, Clock::time_point now) const {
  const uint64_t timeout_us = EffectiveTimeoutUs(request, policy);
  if (timeout_us == 0) return Clock::time_point::max();
  const auto limit = std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(
      std::min<uint64_t>(timeout_us, std::chrono::microseconds::max().count() / 4)));
  return Clock::time_point::max() - now > limit ? now + limit : Clock::time_point::max();
}

Status RequestQueue::Push(std::unique_ptr<InferenceRequest>& request, uint32_t level,
                          uint64_t batch_size, Clock::time_point now, uint32_t slot) {
  const uint64_t max_size = MaxSize(level);
  LevelFifo& fifo = fifos_[level];
  if (fifo.size() >= max_size) {
    return Unavailable(label_ + " queue is full (max_queue_size " + std::to_string(max_size) +
                       ")");
  }
  const QueuePolicy& policy = policies_[level - 1];
  QueuedRequest entry;
  entry.deadline = Deadline(*request, policy, now);
  entry.enqueue_time = now;
  entry.timeout_action = policy.timeout_action;
  entry.batch_size = batch_size;
  entry.slot = slot;
  entry.request = std::move(request);
  fifo.ready.push_back(std::move(entry));
  ++size_;
  return Status::Ok();
}

Clock::time_point RequestQueue::ApplyPolicies(Clock::time_point now,
                                              std::vector<RejectedRequest>* rejected) {
  Clock::time_point earliest = Clock::time_point::max();
  for (auto& [level, fifo] : fifos_) {
    // A member reused across calls: this runs under the scheduler's lock on
    // every leader pass, and a fresh deque would allocate each time.
    std::vector<QueuedRequest>& newly_delayed = delayed_scratch_;
    newly_delayed.clear();
    // Marks entries to drop by moving their request out; erased below.
    for (auto* part : {&fifo.ready, &fifo.delayed}) {
      for (QueuedRequest& entry : *part) {
        InferenceRequest& request = *entry.request;
        if (request.cancelled && request.cancelled->IsCancelled()) {
          rejected->push_back({std::move(entry.request),
                               {StatusCode::kCancelled, "request '" + request.id + "' for " +
                                                            label_ + " was cancelled"},
                               entry.slot});
        } else if (entry.deadline <= now) {
          if (entry.timeout_action == QueuePolicy::TimeoutAction::kDelay) {
            entry.deadline = Clock::time_point::max();
            newly_delayed.push_back(std::move(entry));
          } else {
            rejected->push_back({std::move(entry.request),
                                 Unavailable("Request timeout expired (" + label_ +
                                             ", request '" + request.id + "')"),
                                 entry.slot});
          }
        } else {
          earliest = std::min(earliest, entry.deadline);
        }
      }
      const size_t before = part->size();
      std::erase_if(*part, [](const QueuedRequest& e) { return e.request == nullptr; });
      size_ -= before - part->size();
    }
    for (QueuedRequest& entry : newly_delayed) {
      fifo.delayed.push_back(std::move(entry));
      ++size_;
    }
  }
  return earliest;
}

std::vector<QueuedRequest> RequestQueue::Take(const std::vector<QueuedRequest*>& entries) {
  std::vector<QueuedRequest> taken;
  taken.reserve(entries.size());
  for (QueuedRequest* entry : entries) taken.push_back(std::move(*entry));
  for (auto& [level, fifo] : fifos_) {
    for (auto* part : {&fifo.ready, &fifo.delayed}) {
      const size_t before = part->size();
      std::erase_if(*part, [](const QueuedRequest& e) { return e.request == nullptr; });
      size_ -= before - part->size();
    }
  }
  return taken;
}

}  // namespace ortserve
