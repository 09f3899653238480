#include "scheduler/BatchTracing.h"

#include <algorithm>
#include <memory>

namespace ortserve {

void RecordBatchTrace(std::vector<QueuedRequest>& batch, Clock::time_point start, Clock::time_point end,
                      uint64_t rows) {
  const auto traced = [](const QueuedRequest& entry) { return entry.request && entry.request->trace; };
  if (std::none_of(batch.begin(), batch.end(), traced)) return;
  auto batch_trace = std::make_shared<BatchTrace>();
  batch_trace->span = {RandomTraceId(), RandomSpanId()};
  batch_trace->start = start;
  batch_trace->end = end;
  batch_trace->rows = rows;
  batch_trace->requests = batch.size();
  for (QueuedRequest& entry : batch) {
    if (!traced(entry)) continue;
    RequestTrace& trace = *entry.request->trace;
    batch_trace->request_spans.push_back(trace.context());
    trace.enqueue_time = entry.enqueue_time;
    trace.batch = batch_trace;
  }
}

}  // namespace ortserve
