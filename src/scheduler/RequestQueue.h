#pragma once
// The waiting room of one model version: one FIFO per priority level, each
// bounded and timed by its QueuePolicy. Not thread-safe; DynamicBatcher guards
// it with its mutex.
//
// Scheduling order: level 1 before level 2 ...; within a level, arrival order,
// and requests whose timeout expired under TimeoutAction::kDelay after all
// others of that level (Triton's "delayed" queue). A delayed request has no
// deadline any more.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "scheduler/DynamicBatcherOptions.h"

namespace ortserve {

struct QueuedRequest {
  std::unique_ptr<InferenceRequest> request;  // null once taken out
  Clock::time_point enqueue_time;
  Clock::time_point deadline = Clock::time_point::max();  // max: no timeout
  QueuePolicy::TimeoutAction timeout_action = QueuePolicy::TimeoutAction::kReject;
  uint64_t batch_size = 1;  // rows it adds to a batch (dim 0; 1 without batching)
  uint32_t slot = 0;        // the sequence batcher's slot of its sequence (0 elsewhere)
};

struct RejectedRequest {
  std::unique_ptr<InferenceRequest> request;
  Status status;
  uint32_t slot = 0;  // as QueuedRequest::slot
};

class RequestQueue {
 public:
  // `label` names the model in messages ("model 'x' version '1'").
  // `level_policies[i]` is the policy of priority level i + 1 (at least one);
  // a policy's max_queue_size 0 means `default_max_queue_size`.
  RequestQueue(std::string label, std::vector<QueuePolicy> level_policies,
               uint64_t default_max_queue_size);

  // Ownership of `request` moves into the queue iff the result is OK; a full
  // level answers kUnavailable naming the limit. `level` is in 1..levels().
  Status Push(std::unique_ptr<InferenceRequest>& request, uint32_t level, uint64_t batch_size,
              Clock::time_point now, uint32_t slot = 0);

  // Takes out cancelled requests (kCancelled) and requests whose deadline has
  // passed under kReject (kUnavailable "Request timeout expired ..."), moves
  // those under kDelay behind their level. Returns the earliest deadline left.
  Clock::time_point ApplyPolicies(Clock::time_point now, std::vector<RejectedRequest>* rejected);

  // Visits entries in scheduling order while `visit(QueuedRequest&)` is true.
  template <typename Visit>
  void Scan(Visit&& visit) {
    for (auto& [level, fifo] : fifos_) {
      for (auto* part : {&fifo.ready, &fifo.delayed})
        for (QueuedRequest& entry : *part)
          if (!visit(entry)) return;
    }
  }

  // Moves the given entries (pointers obtained from Scan, with no change to
  // the queue in between) out of the queue, in the given order.
  std::vector<QueuedRequest> Take(const std::vector<QueuedRequest*>& entries);

  // The timeout that applies to `request` under `policy`, in µs (0: none):
  // a request may shorten the policy's default, never lengthen it.
  static uint64_t EffectiveTimeoutUs(const InferenceRequest& request, const QueuePolicy& policy);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  uint32_t levels() const { return static_cast<uint32_t>(policies_.size()); }

 private:
  struct LevelFifo {
    std::deque<QueuedRequest> ready;
    std::deque<QueuedRequest> delayed;
    size_t size() const { return ready.size() + delayed.size(); }
  };

  uint64_t MaxSize(uint32_t level) const;
  Clock::time_point Deadline(const InferenceRequest& request, const QueuePolicy& policy,
                             Clock::time_point now) const;

  std::string label_;
  std::vector<QueuePolicy> policies_;  // index level - 1
  uint64_t default_max_queue_size_;
  // Created on first use so that many configured levels cost nothing.
  std::map<uint32_t, LevelFifo> fifos_;
  size_t size_ = 0;
  std::vector<QueuedRequest> delayed_scratch_;  // ApplyPolicies' working space
};

}  // namespace ortserve
