#pragma once
// The sequence batcher's test fixture, driven as the dynamic batcher's
// (DynamicBatcherFixture.h): fake instances held at a gate decide which
// requests batch together, a fake clock drives windows, deadlines and idle
// timeouts, and nothing sleeps or asserts on timing. Every run's inputs are
// recorded by name (FakeInstanceControl::RunRecord::inputs), so a test reads
// the control and state tensors the batcher filled.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fakes/FakeInstance.h"
#include "fakes/FakeSchedulerClock.h"
#include "fakes/RecordedCompletions.h"
#include "scheduler/SequenceBatcher.h"

#include "TestTensors.h"

namespace ortserve::testing_util {

using namespace std::chrono_literals;
using Kind = ControlInput::Kind;
using Strategy = SequencePolicy::Strategy;

// An INT32 START/END/READY control with these false/true values.
inline ControlInput Int32Control(Kind kind, std::string name, int32_t no = 0, int32_t yes = 1) {
  ControlInput c;
  c.kind = kind;
  c.name = std::move(name);
  c.dtype = DataType::kInt32;
  std::memcpy(c.false_value.data(), &no, 4);
  std::memcpy(c.true_value.data(), &yes, 4);
  return c;
}

inline ControlInput CorrelationControl(std::string name, DataType dtype) {
  ControlInput c;
  c.kind = Kind::kCorrelationId;
  c.name = std::move(name);
  c.dtype = dtype;
  return c;
}

// Model 'seq' version '1', `max_batch_size`, the strategy's slots (direct:
// max_batch_size; oldest: `candidates`), no window; controls START, END,
// READY (INT32 0/1) and CORRID (UINT64).
inline SequenceBatcherOptions SequenceOptions(int max_batch_size = 4, Strategy strategy = Strategy::kDirect,
                                              uint32_t candidates = 4) {
  SequenceBatcherOptions o;
  o.batcher.model_name = "seq";
  o.batcher.model_version = "1";
  o.batcher.batching.max_batch_size = max_batch_size;
  o.batcher.batching.dynamic_batching = strategy == Strategy::kOldest;
  o.batcher.batching.adaptive_window = false;
  o.sequence.strategy = strategy;
  o.sequence.slots_per_instance =
      strategy == Strategy::kOldest ? candidates : static_cast<uint32_t>(std::max(1, max_batch_size));
  o.sequence.controls = {Int32Control(Kind::kStart, "START"), Int32Control(Kind::kEnd, "END"),
                         Int32Control(Kind::kReady, "READY"), CorrelationControl("CORRID", DataType::kUint64)};
  return o;
}

// One FP32 state STATE_IN <- STATE_OUT of dims [1]; `initial` empty: zeros.
inline StateTensor AccumulatorState(std::vector<float> initial = {}) {
  StateTensor s;
  s.input_name = "STATE_IN";
  s.output_name = "STATE_OUT";
  s.dtype = DataType::kFp32;
  s.dims = {1};
  if (!initial.empty()) s.initial = TensorData::Copy(initial.data(), initial.size() * sizeof(float));
  return s;
}

// The elements of `t` as T.
template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), v.size() * sizeof(T));
  return v;
}

class SequenceBatcherTest : public ::testing::Test {
 protected:
  void Start(SequenceBatcherOptions options, size_t instances = 1,
             std::vector<std::string> outputs = {"OUTPUT0", "OUTPUT1"}) {
    batching_ = options.batcher.batching.max_batch_size > 0;
    owned_stats_ = std::make_unique<ModelStatistics>(options.batcher.batching.max_batch_size);
    stats_ = owned_stats_.get();
    auto created = SequenceBatcher::Create(std::move(options), MakeFakeInstances(model_, instances, outputs), stats_,
                                           &completer_, clock_);
    ASSERT_TRUE(created.ok()) << created.status().message();
    scheduler_ = std::move(created).value();
  }
  // As Start, with the accumulator state (STATE_OUT = STATE_IN + INPUT0).
  void StartWithState(SequenceBatcherOptions options, std::vector<float> initial = {}, size_t instances = 1) {
    options.sequence.states = {AccumulatorState(std::move(initial))};
    model_->LoopState("STATE_IN", "STATE_OUT");
    Start(std::move(options), instances, {"OUTPUT0", "STATE_OUT"});
  }

  // A request of sequence `sequence` (0: none) with INPUT0 = [1, 1] {value}
  // ([1] without a batch dim).
  std::unique_ptr<InferenceRequest> Request(const std::string& id, uint64_t sequence, float value,
                                            bool start = false, bool end = false) {
    auto r = std::make_unique<InferenceRequest>();
    r->model_name = "seq";
    r->id = id;
    r->inputs.push_back(Fp32("INPUT0", batching_ ? Shape{1, 1} : Shape{1}, {value}));
    r->sequence.id = sequence;
    r->sequence.start = start;
    r->sequence.end = end;
    r->arrival_time = clock_->Now();
    r->on_complete = done_.For(id);
    return r;
  }
  void Submit(std::unique_ptr<InferenceRequest> r) { scheduler_->Submit(std::move(r)); }
  void Send(const std::string& id, uint64_t sequence, float value, bool start = false, bool end = false) {
    Submit(Request(id, sequence, value, start, end));
  }

  // `id` succeeded; its OUTPUT0 (INPUT0 + 1).
  float Output(const std::string& id, const std::string& name = "OUTPUT0") {
    auto result = done_.Get(id);
    EXPECT_TRUE(result.ok()) << id << ": " << result.status().message();
    if (!result.ok()) return -1;
    for (const Tensor& t : result.value().outputs)
      if (t.name == name) return Floats(t).at(0);
    ADD_FAILURE() << id << " has no output " << name;
    return -1;
  }
  // `id` failed with `code`; its message.
  std::string Error(const std::string& id, StatusCode code) {
    auto result = done_.Get(id);
    EXPECT_FALSE(result.ok()) << id << " succeeded";
    if (result.ok()) return "";
    EXPECT_EQ(result.status().code(), code) << id << ": " << result.status().message();
    return result.status().message();
  }

  // Run `k` (0-based, in start order)'s input `name`, as T.
  template <typename T>
  std::vector<T> RunInput(size_t k, const std::string& name) {
    auto runs = model_->Runs();
    EXPECT_LT(k, runs.size());
    if (k >= runs.size()) return {};
    auto it = runs[k].inputs.find(name);
    EXPECT_NE(it, runs[k].inputs.end()) << "run " << k << " has no input " << name;
    return it == runs[k].inputs.end() ? std::vector<T>{} : Values<T>(it->second);
  }
  Shape RunShape(size_t k, const std::string& name) {
    auto runs = model_->Runs();
    return k < runs.size() && runs[k].inputs.count(name) ? runs[k].inputs.at(name).shape : Shape{};
  }
  uint64_t Outcome(RequestOutcome outcome) const { return stats_->outcomes[static_cast<size_t>(outcome)].load(); }
  uint64_t Ended(SequenceEnd reason) const { return stats_->sequences.Ended(reason); }

  // Waits (liveness-bounded) until `done` holds: for effects of a worker
  // pass that answers nobody (an idle sequence ended).
  template <typename Done>
  bool Eventually(Done done) {
    for (int i = 0; i < 30000 && !done(); ++i) std::this_thread::sleep_for(1ms);
    return done();
  }

  bool batching_ = true;
  std::shared_ptr<FakeSchedulerClock> clock_ = std::make_shared<FakeSchedulerClock>();
  std::shared_ptr<FakeInstanceControl> model_ = std::make_shared<FakeInstanceControl>();
  RecordedCompletions done_;
  CallbackCompleter completer_;
  std::unique_ptr<ModelStatistics> owned_stats_;
  ModelStatistics* stats_ = nullptr;
  std::unique_ptr<Scheduler> scheduler_;  // declared last: shut down first
};

}  // namespace ortserve::testing_util
