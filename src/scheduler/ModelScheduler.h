#pragma once
// Per model version scheduling: a bounded queue, a dynamic batcher and one
// worker thread per model instance. Knows nothing of ORT: it drives
// ModelInstance objects.
//
// Threads: exactly one worker per instance, all created in Create(); Submit()
// never blocks and never runs a model. Each worker takes the oldest request,
// gathers compatible requests (same non-batch shapes and dtypes) up to
// max_batch_size, waiting at most max_queue_delay for a preferred size, stacks
// their inputs along dim 0, runs its instance, and slices the outputs back to
// each request in order.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/ModelStatistics.h"
#include "core/Status.h"
#include "scheduler/ComputeSlots.h"
#include "runtime/ModelInstance.h"

namespace ortserve {

struct QueuePolicy {
  enum class TimeoutAction { kReject, kDelay };
  uint64_t max_queue_size = 0;        // 0: the scheduler's global default bound
  uint64_t default_timeout_us = 0;    // 0: none
  bool allow_timeout_override = true; // honour the request's `timeout` parameter
  TimeoutAction timeout_action = TimeoutAction::kReject;
};

struct SchedulerOptions {
  std::string model_name;
  std::string model_version;
  // 0: the model has no batch dimension; requests run one at a time.
  int max_batch_size = 0;
  bool dynamic_batching = false;
  std::vector<int> preferred_batch_sizes;
  uint64_t max_queue_delay_us = 0;
  // The batching window closes early once the requests the scheduler expects
  // have arrived (see "Adaptive batching window" in SchedulerImpl.h); false:
  // Triton's fixed window, always waiting max_queue_delay for a fuller batch.
  bool adaptive_batch_window = true;
  // Bound used when a policy says 0 (Triton's "unbounded"): we never queue
  // without bound.
  uint64_t default_max_queue_size = 1024;
  QueuePolicy default_queue_policy;
  // Priority levels 1..priority_levels (1 = highest); 0 levels: no priorities.
  uint32_t priority_levels = 0;
  uint32_t default_priority_level = 0;
  std::vector<std::pair<uint32_t, QueuePolicy>> priority_queue_policies;
  // Shared by all schedulers of the process; null: no limit. Each execution
  // leases `compute_slots_per_run` slots (the instance's intra-op threads).
  std::shared_ptr<ComputeSlots> compute_slots;
  int compute_slots_per_run = 1;
  // Instances share the work in hand: a worker takes at most its share of
  // the rows planned plus those the other instances are running (over the
  // instances that can compute at once, as the compute slots allow) and
  // leaves the rest queued for the next free instance, to run without a
  // window. For instances on their own cores (CPU): a batch's rows cost about
  // the same split or not, so no core idles while another works through a
  // queue. Off for instances sharing one device (GPU), where one larger batch
  // beats concurrent halves; off is Triton's dispatch (each batch whole).
  bool balance_across_instances = false;
};

class ModelScheduler {
 public:
  // Validates options and starts one worker per instance. `stats` must outlive
  // the scheduler.
  static Result<std::unique_ptr<ModelScheduler>> Create(
      SchedulerOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
      ModelStatistics* stats);

  virtual ~ModelScheduler() = default;

  // Takes ownership; `request->on_complete` is called exactly once. A full
  // queue answers at once with kUnavailable naming the model and the limit.
  // Requests must already be validated against the model config. A request
  // whose queue timeout passes before it runs is answered kUnavailable
  // "Request timeout expired ..." (as Triton) and never computed; a cancelled
  // one kCancelled. See SchedulerImpl.h for the full policy.
  virtual void Submit(std::unique_ptr<InferenceRequest> request) = 0;

  // As Submit, except when the queue is full: then the request stays with the
  // caller (not completed, not counted) and the kUnavailable status saying so
  // is returned, so that the caller can send it elsewhere (a fallback model).
  // Ownership moves to the scheduler iff the result is OK; every other
  // refusal is answered through on_complete as Submit answers it.
  virtual Status TrySubmit(std::unique_ptr<InferenceRequest>& request) {
    Submit(std::move(request));
    return Status::Ok();
  }

  // Whether `request`, queued now, is expected to wait longer than its queue
  // timeout (only for requests that would be rejected on timeout). The
  // expected wait is executions ahead (queue depth, divided by
  // max_batch_size under dynamic batching) x a moving average of the recent
  // execution time / instances; false while no execution has been measured.
  virtual bool ExpectedToMissDeadline(const InferenceRequest& /*request*/) const { return false; }

  // Stops accepting (later Submits answer kUnavailable), finishes queued and
  // running requests until `abandon_at`, then answers what is still queued or
  // running with kUnavailable ("... is shutting down ...", counted as
  // rejected; running batches are stopped through ModelInstance::Terminate),
  // and joins the workers. Every accepted request is answered before it
  // returns. Idempotent; the destructor calls Shutdown() (no deadline).
  virtual void Shutdown(Clock::time_point abandon_at) = 0;
  void Shutdown() { Shutdown(Clock::time_point::max()); }

  virtual size_t QueueDepth() const = 0;
  virtual size_t BusyInstances() const = 0;
};

}  // namespace ortserve
