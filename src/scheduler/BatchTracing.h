#pragma once
// What the scheduler contributes to distributed tracing: for a batch with at
// least one traced request (InferenceRequest::trace), one BatchTrace with the
// batch's times, a fresh batch span id and links to the traced requests'
// spans, recorded into each traced request's RequestTrace together with its
// enqueue time. The scheduler knows nothing of spans or exporters; the front
// ends turn these records into spans (server/tracing/RequestTracer.h).
#include <cstdint>
#include <vector>

#include "scheduler/RequestQueue.h"

namespace ortserve {

// Call after the batch ran and before any of its requests is completed.
// Costs one null check per request when none is traced.
void RecordBatchTrace(std::vector<QueuedRequest>& batch, Clock::time_point start, Clock::time_point end,
                      uint64_t rows);

}  // namespace ortserve
