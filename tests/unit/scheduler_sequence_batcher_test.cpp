// The sequence batcher's slots, strategies, control inputs and implicit
// state (tests/unit/SequenceBatcherFixture.h says how they are driven).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "SequenceBatcherFixture.h"
#include "core/Cancellation.h"

namespace ortserve {
namespace {

using namespace testing_util;

// ---- direct: row r is slot r --------------------------------------------------

TEST_F(SequenceBatcherTest, DirectSequencesKeepTheirSlotAndEmptySlotsArePadded) {
  Start(SequenceOptions(4, Strategy::kDirect));
  model_->Hold();
  Send("a1", 1, 10, /*start=*/true);
  ASSERT_TRUE(model_->WaitForRuns(1));  // a1 runs alone in slot 0
  Send("b1", 2, 20, true);              // slot 1
  Send("c1", 3, 30, true);              // slot 2
  Send("a2", 1, 11);                    // slot 0 again
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(2));
  EXPECT_EQ(RunInput<uint64_t>(1, "CORRID"), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(RunInput<int32_t>(1, "START"), (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(RunInput<int32_t>(1, "READY"), (std::vector<int32_t>{1, 1, 1}));
  EXPECT_EQ(RunShape(1, "START"), (Shape{3, 1}));
  model_->Release(1);
  EXPECT_FLOAT_EQ(Output("a2"), 12);
  EXPECT_FLOAT_EQ(Output("b1"), 21);

  Send("c2", 3, 31, false, /*end=*/true);  // only slot 2 has a request: rows 0 and 1 are padding
  ASSERT_TRUE(model_->WaitForRuns(3));
  EXPECT_EQ(RunInput<int32_t>(2, "READY"), (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(RunInput<uint64_t>(2, "CORRID"), (std::vector<uint64_t>{0, 0, 3}));
  EXPECT_EQ(RunInput<int32_t>(2, "START"), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(RunInput<int32_t>(2, "END"), (std::vector<int32_t>{0, 0, 1}));
  model_->Open();
  EXPECT_FLOAT_EQ(Output("c2"), 32);

  scheduler_->Shutdown();
  // Triton's statistics count the rows that ran, padding included; success
  // counts the requests.
  EXPECT_EQ(stats_->execution_count.load(), 3u);
  EXPECT_EQ(stats_->inference_count.load(), 1u + 3u + 3u);
  EXPECT_EQ(stats_->BatchStatAt(3).compute_infer.count.load(), 2u);
  EXPECT_EQ(stats_->success.count.load(), 5u);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 5u);
}

TEST_F(SequenceBatcherTest, DirectPaddingBetweenRealRowsIsNotReady) {
  Start(SequenceOptions(4, Strategy::kDirect));
  model_->Hold();
  Send("a1", 1, 10, /*start=*/true);  // slot 0
  ASSERT_TRUE(model_->WaitForRuns(1));
  Send("b1", 2, 20, true, /*end=*/true);  // slot 1, ended with its first request
  Send("c1", 3, 30, true);               // slot 2
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(2));  // b1 and c1, held
  Send("a2", 1, 11);
  Send("c2", 3, 31);  // slot 1 is free by then: row 1 is padding between two real rows
  model_->Open();
  EXPECT_FLOAT_EQ(Output("c1"), 31);
  EXPECT_FLOAT_EQ(Output("a2"), 12);
  EXPECT_FLOAT_EQ(Output("c2"), 32);
  const auto runs = model_->Runs();
  ASSERT_EQ(runs.size(), 3u);  // a2 and c2 ran together
  EXPECT_EQ(RunInput<int32_t>(2, "READY"), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(RunInput<uint64_t>(2, "CORRID"), (std::vector<uint64_t>{1, 0, 3}));
  EXPECT_EQ(RunInput<int32_t>(2, "START"), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(RunShape(2, "READY"), (Shape{3, 1}));
}

TEST_F(SequenceBatcherTest, DirectWithoutABatchDimensionRunsScalarInputs) {
  // A scalar input never "stacks"; with one slot there is nothing to stack.
  Start(SequenceOptions(0, Strategy::kDirect));
  auto request = [this](const std::string& id, bool start, float value) {
    auto r = Request(id, 9, value, start);
    r->inputs[0].shape = {};
    return r;
  };
  Submit(request("a1", true, 1));
  EXPECT_FLOAT_EQ(Output("a1"), 2);
  Submit(request("a2", false, 5));
  EXPECT_FLOAT_EQ(Output("a2"), 6);
  EXPECT_EQ(RunShape(1, "START"), (Shape{1}));
  EXPECT_EQ(stats_->sequences.active.load(), 1u);
}

TEST_F(SequenceBatcherTest, DirectWaitsForMinimumSlotUtilizationUpToTheDelay) {
  SequenceBatcherOptions options = SequenceOptions(4, Strategy::kDirect);
  options.batcher.batching.max_queue_delay_us = 5'000'000;
  options.sequence.minimum_slot_utilization = 0.5f;  // 2 of 4 slots
  Start(options);
  const uint64_t waits = clock_->WaitsStarted();
  Send("a1", 1, 1, true);
  ASSERT_TRUE(clock_->AwaitWaits(waits + 1));  // the worker looked and waits
  EXPECT_TRUE(model_->Runs().empty());
  Send("b1", 2, 2, true);  // 2 of 4: runs at once
  EXPECT_FLOAT_EQ(Output("a1"), 2);
  EXPECT_FLOAT_EQ(Output("b1"), 3);
  ASSERT_EQ(model_->Runs().size(), 1u);
  EXPECT_EQ(RunShape(0, "READY"), (Shape{2, 1}));

  const uint64_t more = clock_->WaitsStarted();
  Send("a2", 1, 1);
  ASSERT_TRUE(clock_->AwaitWaits(more + 1));
  EXPECT_EQ(model_->Runs().size(), 1u);
  clock_->Advance(5s);  // the delay bounds the wait
  EXPECT_FLOAT_EQ(Output("a2"), 2);
}

// ---- oldest: candidate sequences, batched as the dynamic batcher ---------------

TEST_F(SequenceBatcherTest, OldestBatchesAtMostOneRequestPerSequence) {
  Start(SequenceOptions(4, Strategy::kOldest, /*candidates=*/8));
  model_->Hold();
  Send("a1", 1, 10, true);
  ASSERT_TRUE(model_->WaitForRuns(1));
  Send("a2", 1, 11);
  Send("a3", 1, 12);
  Send("b1", 2, 20, true);
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(2));
  EXPECT_EQ(RunInput<uint64_t>(1, "CORRID"), (std::vector<uint64_t>{1, 2}));  // a2 and b1, oldest first
  EXPECT_EQ(model_->Runs()[1].values, (std::vector<float>{11, 20}));
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(3));
  EXPECT_EQ(model_->Runs()[2].values, (std::vector<float>{12}));  // a3 after a2, alone
  model_->Open();
  EXPECT_FLOAT_EQ(Output("a3"), 13);
  EXPECT_FLOAT_EQ(Output("b1"), 21);
}

TEST_F(SequenceBatcherTest, OldestHasMoreCandidatesThanRowsAndTakesTheOldest) {
  Start(SequenceOptions(2, Strategy::kOldest, /*candidates=*/4));
  model_->Hold();
  Send("a1", 1, 1, true);
  ASSERT_TRUE(model_->WaitForRuns(1));
  Send("b1", 2, 2, true);
  Send("c1", 3, 3, true);
  Send("d1", 4, 4, true);  // four live sequences on an instance running batches of 2
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(2));
  EXPECT_EQ(model_->Runs()[1].values, (std::vector<float>{2, 3}));
  model_->Open();
  EXPECT_FLOAT_EQ(Output("d1"), 5);
  EXPECT_EQ(stats_->sequences.slots.load(), 4u);
  EXPECT_EQ(stats_->sequences.active.load(), 4u);
}

TEST_F(SequenceBatcherTest, OldestPreferredSizeGoesAtOnceAndTheDelayBoundsTheRest) {
  SequenceBatcherOptions options = SequenceOptions(4, Strategy::kOldest, 8);
  options.batcher.batching.preferred_batch_sizes = {2};
  options.batcher.batching.max_queue_delay_us = 10'000'000;
  Start(options);
  const uint64_t waits = clock_->WaitsStarted();
  Send("a1", 1, 1, true);
  ASSERT_TRUE(clock_->AwaitWaits(waits + 1));  // one request: waits for the window
  EXPECT_TRUE(model_->Runs().empty());
  Send("b1", 2, 2, true);  // the preferred size: goes without the clock moving
  EXPECT_FLOAT_EQ(Output("a1"), 2);
  EXPECT_FLOAT_EQ(Output("b1"), 3);
  ASSERT_EQ(model_->Runs().size(), 1u);
  EXPECT_EQ(model_->Runs()[0].shape, (Shape{2, 1}));

  const uint64_t more = clock_->WaitsStarted();
  Send("a2", 1, 5);
  ASSERT_TRUE(clock_->AwaitWaits(more + 1));
  EXPECT_EQ(model_->Runs().size(), 1u);
  clock_->Advance(10s);
  EXPECT_FLOAT_EQ(Output("a2"), 6);
}

TEST_F(SequenceBatcherTest, SequencesSpreadOverInstancesAndStayOnTheirs) {
  Start(SequenceOptions(2, Strategy::kDirect), /*instances=*/2);
  Send("a1", 1, 1, true);
  Send("b1", 2, 2, true);
  EXPECT_FLOAT_EQ(Output("a1"), 2);
  EXPECT_FLOAT_EQ(Output("b1"), 3);
  for (int i = 2; i <= 4; ++i) {
    Send("a" + std::to_string(i), 1, 1);
    Send("b" + std::to_string(i), 2, 2);
    EXPECT_FLOAT_EQ(Output("a" + std::to_string(i)), 2);
    EXPECT_FLOAT_EQ(Output("b" + std::to_string(i)), 3);
  }
  // Slot 0 of each instance: every run of a sequence has one row, its own.
  for (const auto& run : model_->Runs()) EXPECT_EQ(run.shape, (Shape{1, 1}));
  EXPECT_EQ(stats_->sequences.slots.load(), 4u);
  EXPECT_EQ(stats_->sequences.active.load(), 2u);
}

// ---- control inputs -----------------------------------------------------------

TEST_F(SequenceBatcherTest, ControlsInEveryFormAndCorrelationIdTypes) {
  SequenceBatcherOptions options = SequenceOptions(4, Strategy::kDirect);
  ControlInput start = Int32Control(Kind::kStart, "START");
  start.dtype = DataType::kFp32;
  const float no = 0.5f, yes = 2.5f;
  std::memcpy(start.false_value.data(), &no, 4);
  std::memcpy(start.true_value.data(), &yes, 4);
  ControlInput ready = Int32Control(Kind::kReady, "READY");
  ready.dtype = DataType::kBool;
  ready.false_value[0] = std::byte{0};
  ready.true_value[0] = std::byte{1};
  options.sequence.controls = {start, Int32Control(Kind::kEnd, "END", 7, 9), ready,
                               CorrelationControl("CORRID", DataType::kInt32)};
  Start(options);
  model_->Hold();
  Send("a1", 5, 1, true);  // slot 0
  ASSERT_TRUE(model_->WaitForRuns(1));
  Send("b1", 6, 2, true, true);  // slot 1: a sequence of one request
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(2));  // slot 0 (a, nothing queued) is padding
  model_->Release(1);
  EXPECT_FLOAT_EQ(Output("b1"), 3);
  Send("a2", 5, 1);
  model_->Open();
  EXPECT_FLOAT_EQ(Output("a2"), 2);

  auto runs = model_->Runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].inputs.at("START").dtype, DataType::kFp32);
  EXPECT_EQ(RunInput<float>(0, "START"), (std::vector<float>{2.5f}));
  EXPECT_EQ(RunInput<float>(1, "START"), (std::vector<float>{0.5f, 2.5f}));
  EXPECT_EQ(runs[1].inputs.at("READY").dtype, DataType::kBool);
  EXPECT_EQ(RunInput<uint8_t>(1, "READY"), (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(RunInput<int32_t>(1, "END"), (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(runs[1].inputs.at("CORRID").dtype, DataType::kInt32);
  EXPECT_EQ(RunInput<int32_t>(1, "CORRID"), (std::vector<int32_t>{0, 6}));
  EXPECT_EQ(RunInput<float>(2, "START"), (std::vector<float>{0.5f}));  // a2 continues: START false
  EXPECT_EQ(RunInput<int32_t>(2, "END"), (std::vector<int32_t>{7}));
  EXPECT_EQ(RunInput<int32_t>(2, "CORRID"), (std::vector<int32_t>{5}));
}

TEST_F(SequenceBatcherTest, StringCorrelationIdsFillABytesCorrid) {
  SequenceBatcherOptions options = SequenceOptions(2, Strategy::kOldest, 4);
  options.sequence.controls = {Int32Control(Kind::kStart, "START"),
                               CorrelationControl("CORRID", DataType::kBytes)};
  Start(options);
  auto r = Request("s1", 0, 1, true);
  r->sequence.string_id = "caller-42";
  Submit(std::move(r));
  EXPECT_FLOAT_EQ(Output("s1"), 2);
  auto runs = model_->Runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].inputs.at("CORRID").dtype, DataType::kBytes);
  EXPECT_EQ(DecodeStrings(runs[0].inputs.at("CORRID").data), (std::vector<std::string>{"caller-42"}));
}

TEST_F(SequenceBatcherTest, WithoutABatchDimensionControlsAreOneElementEach) {
  SequenceBatcherOptions options = SequenceOptions(0, Strategy::kOldest, /*candidates=*/3);
  Start(options);
  model_->Hold();
  Send("a1", 1, 1, true);
  ASSERT_TRUE(model_->WaitForRuns(1));
  Send("b1", 2, 2, true);
  Send("c1", 3, 3, true);  // three live sequences, one request per run
  model_->Open();
  EXPECT_FLOAT_EQ(Output("c1"), 4);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(RunShape(k, "START"), (Shape{1}));
    EXPECT_EQ(RunShape(k, "CORRID"), (Shape{1}));
  }
  EXPECT_EQ(RunInput<uint64_t>(2, "CORRID"), (std::vector<uint64_t>{3}));
}

// ---- implicit state -----------------------------------------------------------

TEST_F(SequenceBatcherTest, StateIsFedBackAndKeptPerSequence) {
  StartWithState(SequenceOptions(4, Strategy::kOldest, 4));
  Send("a1", 1, 1, true);
  EXPECT_FLOAT_EQ(Output("a1", "STATE_OUT"), 1);
  model_->Hold();
  Send("b1", 2, 100, true);
  ASSERT_TRUE(model_->WaitForRuns(2));
  Send("a2", 1, 2);  // a and b in one batch below: each row has its own state
  Send("b2", 2, 200);
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(3));
  model_->Open();
  EXPECT_FLOAT_EQ(Output("a2", "STATE_OUT"), 3);
  EXPECT_FLOAT_EQ(Output("b2", "STATE_OUT"), 300);
  EXPECT_EQ(RunInput<float>(2, "STATE_IN"), (std::vector<float>{1, 100}));
  EXPECT_EQ(stats_->sequences.state_bytes.load(), 2 * sizeof(float));

  Send("a3", 1, 3, false, /*end=*/true);
  EXPECT_FLOAT_EQ(Output("a3", "STATE_OUT"), 6);
  EXPECT_EQ(RunInput<float>(3, "STATE_IN"), (std::vector<float>{3}));
  // a ended: its state is freed, b's is kept.
  EXPECT_EQ(stats_->sequences.state_bytes.load(), sizeof(float));
  EXPECT_EQ(stats_->sequences.active.load(), 1u);
  EXPECT_EQ(Ended(SequenceEnd::kEndFlag), 1u);

  scheduler_->Shutdown();  // b is still open: dropped with its state
  EXPECT_EQ(stats_->sequences.state_bytes.load(), 0u);
  EXPECT_EQ(stats_->sequences.active.load(), 0u);
  EXPECT_EQ(Ended(SequenceEnd::kShutdown), 1u);
}

TEST_F(SequenceBatcherTest, StartBeginsFromTheInitialState) {
  StartWithState(SequenceOptions(4, Strategy::kDirect), /*initial=*/{10});
  Send("a1", 1, 1, true);
  EXPECT_FLOAT_EQ(Output("a1", "STATE_OUT"), 11);
  Send("a2", 1, 1);
  EXPECT_FLOAT_EQ(Output("a2", "STATE_OUT"), 12);
  EXPECT_EQ(RunInput<float>(0, "STATE_IN"), (std::vector<float>{10}));
  EXPECT_EQ(RunInput<float>(1, "STATE_IN"), (std::vector<float>{11}));
}

TEST_F(SequenceBatcherTest, PaddingRowsGetTheInitialStateAndLeaveTheirSlotsStateAlone) {
  StartWithState(SequenceOptions(4, Strategy::kDirect));
  Send("a1", 1, 5, true);  // slot 0
  EXPECT_FLOAT_EQ(Output("a1", "STATE_OUT"), 5);
  Send("b1", 2, 7, true);  // slot 1; slot 0 is padding
  EXPECT_FLOAT_EQ(Output("b1", "STATE_OUT"), 7);
  EXPECT_EQ(RunInput<int32_t>(1, "READY"), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(RunInput<float>(1, "STATE_IN"), (std::vector<float>{0, 0}));
  Send("a2", 1, 1);
  EXPECT_FLOAT_EQ(Output("a2", "STATE_OUT"), 6);  // a's state was not touched by the padding row
}

TEST_F(SequenceBatcherTest, RestartingARunningSequenceResetsItsState) {
  StartWithState(SequenceOptions(4, Strategy::kOldest, 4));
  Send("a1", 1, 4, true);
  Send("a2", 1, 4);
  EXPECT_FLOAT_EQ(Output("a2", "STATE_OUT"), 8);
  Send("a3", 1, 1, /*start=*/true);  // Triton: the old sequence ends there, a new one starts
  EXPECT_FLOAT_EQ(Output("a3", "STATE_OUT"), 1);
  EXPECT_EQ(Ended(SequenceEnd::kRestarted), 1u);
  EXPECT_EQ(stats_->sequences.started.load(), 2u);
  EXPECT_EQ(stats_->sequences.active.load(), 1u);
}

TEST_F(SequenceBatcherTest, IdleSequenceIsEndedAndItsSlotAndStateFreed) {
  SequenceBatcherOptions options = SequenceOptions(1, Strategy::kDirect);  // one slot
  options.sequence.max_sequence_idle_us = 1'000'000;
  StartWithState(options);
  Send("a1", 1, 1, true);
  EXPECT_FLOAT_EQ(Output("a1", "STATE_OUT"), 1);
  EXPECT_EQ(stats_->sequences.state_bytes.load(), sizeof(float));
  Send("b1", 2, 1, true);  // the one slot is taken
  EXPECT_NE(Error("b1", StatusCode::kUnavailable).find("all 1 sequence slots"), std::string::npos);

  clock_->Advance(2s);
  ASSERT_TRUE(Eventually([&] { return stats_->sequences.active.load() == 0; }));
  EXPECT_EQ(stats_->sequences.state_bytes.load(), 0u);
  EXPECT_EQ(Ended(SequenceEnd::kIdleTimeout), 1u);
  Send("a2", 1, 1);
  const std::string late = Error("a2", StatusCode::kInvalidArgument);
  EXPECT_EQ(late.rfind("inference request for sequence 1 to model 'seq' must specify the START flag on the first "
                       "request of the sequence",
                       0),
            0u)
      << late;
  EXPECT_NE(late.find("max_sequence_idle_microseconds"), std::string::npos) << late;
  Send("b2", 2, 3, true);  // the slot is free again, and b starts from zero
  EXPECT_FLOAT_EQ(Output("b2", "STATE_OUT"), 3);
}

TEST_F(SequenceBatcherTest, ASequenceWithWorkQueuedIsNeverIdle) {
  SequenceBatcherOptions options = SequenceOptions(1, Strategy::kDirect);
  options.sequence.max_sequence_idle_us = 1'000'000;
  Start(options);
  model_->Hold();
  Send("a1", 1, 1, true);
  ASSERT_TRUE(model_->WaitForRuns(1));
  Send("a2", 1, 2);
  clock_->Advance(5s);  // long past the idle timeout, but a1 runs and a2 waits
  model_->Open();
  EXPECT_FLOAT_EQ(Output("a1"), 2);
  EXPECT_FLOAT_EQ(Output("a2"), 3);
  EXPECT_EQ(Ended(SequenceEnd::kIdleTimeout), 0u);
}

TEST_F(SequenceBatcherTest, AStateOutputOfTheWrongShapeFailsItsRequestAndEndsTheSequence) {
  StartWithState(SequenceOptions(4, Strategy::kOldest, 4));
  model_->LoopState("STATE_IN", "STATE_OUT", /*wrong_shape=*/true);
  Send("a1", 1, 1, true);
  const std::string message = Error("a1", StatusCode::kInternal);
  EXPECT_NE(message.find("state output 'STATE_OUT'"), std::string::npos) << message;
  Send("a2", 1, 1);
  EXPECT_NE(Error("a2", StatusCode::kInvalidArgument).find("was ended because its request 'a1' failed"),
            std::string::npos);
  EXPECT_EQ(stats_->sequences.state_bytes.load(), 0u);
  EXPECT_EQ(stats_->sequences.active.load(), 0u);
}

// ---- deadlines and cancellation --------------------------------------------------

TEST_F(SequenceBatcherTest, ATimeoutInTheQueueEndsItsSequenceAndOthersCarryOn) {
  Start(SequenceOptions(4, Strategy::kDirect));
  model_->Hold();
  Send("a1", 1, 1, /*start=*/true);
  ASSERT_TRUE(model_->WaitForRuns(1));
  auto late = Request("a2", 1, 2);
  late->timeout_us = 100;
  Submit(std::move(late));
  Send("a3", 1, 3);  // queued behind a2: its sequence will have ended
  clock_->Advance(200us);
  model_->Open();
  EXPECT_FLOAT_EQ(Output("a1"), 2);
  EXPECT_NE(Error("a2", StatusCode::kUnavailable).find("timeout"), std::string::npos);
  EXPECT_NE(Error("a3", StatusCode::kUnavailable).find("sequence 1 was ended because its request 'a2' failed"),
            std::string::npos);
  Send("a4", 1, 4);
  EXPECT_NE(Error("a4", StatusCode::kInvalidArgument).find("must specify the START flag"), std::string::npos);
  Send("b1", 2, 10, true);  // another sequence is served as before
  EXPECT_FLOAT_EQ(Output("b1"), 11);
  EXPECT_EQ(Ended(SequenceEnd::kFailed), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 1u);
  EXPECT_FALSE(model_->EverComputed(2));
}

TEST_F(SequenceBatcherTest, ACancelledRequestEndsItsSequence) {
  Start(SequenceOptions(4, Strategy::kOldest, 4));
  model_->Hold();
  Send("a1", 1, 1, true);
  ASSERT_TRUE(model_->WaitForRuns(1));
  auto gone = Request("a2", 1, 2);
  gone->cancelled = std::make_shared<CancelToken>();
  CancelFlag flag = gone->cancelled;
  Submit(std::move(gone));
  flag->Cancel();
  model_->Open();
  Error("a2", StatusCode::kCancelled);
  Send("a3", 1, 3);
  EXPECT_NE(Error("a3", StatusCode::kInvalidArgument).find("was ended because its request 'a2' failed"),
            std::string::npos);
  EXPECT_FALSE(model_->EverComputed(2));
  EXPECT_EQ(Ended(SequenceEnd::kFailed), 1u);
  EXPECT_EQ(stats_->sequences.active.load(), 0u);
}

}  // namespace
}  // namespace ortserve
