// RecordBatchTrace: what the scheduler writes into traced requests' records.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "scheduler/BatchTracing.h"

namespace ortserve {
namespace {

QueuedRequest Entry(bool traced, Clock::time_point enqueued, uint64_t rows) {
  QueuedRequest entry;
  entry.request = std::make_unique<InferenceRequest>();
  if (traced) {
    entry.request->trace = std::make_shared<RequestTrace>();
    entry.request->trace->trace_id = RandomTraceId();
    entry.request->trace->span_id = RandomSpanId();
  }
  entry.enqueue_time = enqueued;
  entry.batch_size = rows;
  return entry;
}

TEST(RecordBatchTrace, SharesOneBatchRecordLinkingTheTracedRequestsInOrder) {
  const Clock::time_point t0 = Clock::now();
  std::vector<QueuedRequest> batch;
  batch.push_back(Entry(true, t0, 2));
  batch.push_back(Entry(false, t0 + std::chrono::microseconds(1), 1));
  batch.push_back(Entry(true, t0 + std::chrono::microseconds(2), 3));
  const Clock::time_point start = t0 + std::chrono::milliseconds(1);
  const Clock::time_point end = t0 + std::chrono::milliseconds(3);

  RecordBatchTrace(batch, start, end, 6);

  const RequestTrace& first = *batch[0].request->trace;
  const RequestTrace& third = *batch[2].request->trace;
  ASSERT_NE(first.batch, nullptr);
  EXPECT_EQ(first.batch, third.batch);  // one record for the batch
  const BatchTrace& b = *first.batch;
  EXPECT_TRUE(b.span.trace_id.valid());
  EXPECT_TRUE(b.span.span_id.valid());
  EXPECT_NE(b.span.trace_id, first.trace_id);  // the batch span has a trace of its own
  EXPECT_EQ(b.start, start);
  EXPECT_EQ(b.end, end);
  EXPECT_EQ(b.rows, 6u);
  EXPECT_EQ(b.requests, 3u);
  ASSERT_EQ(b.request_spans.size(), 2u);
  EXPECT_EQ(b.request_spans[0], first.context());
  EXPECT_EQ(b.request_spans[1], third.context());
  EXPECT_FALSE(b.emitted.load());
  EXPECT_EQ(first.enqueue_time, t0);
  EXPECT_EQ(third.enqueue_time, t0 + std::chrono::microseconds(2));
  EXPECT_EQ(batch[1].request->trace, nullptr);  // untraced stays untraced
}

TEST(RecordBatchTrace, DoesNothingWithoutATracedRequest) {
  std::vector<QueuedRequest> batch;
  batch.push_back(Entry(false, Clock::now(), 1));
  batch.push_back(Entry(false, Clock::now(), 1));
  RecordBatchTrace(batch, Clock::now(), Clock::now(), 2);
  for (const QueuedRequest& entry : batch) EXPECT_EQ(entry.request->trace, nullptr);
}

}  // namespace
}  // namespace ortserve
