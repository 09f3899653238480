// ModelScheduler behaviour, driven through fake instances whose Run can be
// held at a gate, and a fake clock: batches are formed while instances are
// held busy, so which requests batch together is deterministic, and nothing
// here depends on sleeping or asserts on timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fakes/FakeSchedulerClock.h"
#include "scheduler/ModelScheduler.h"
#include "scheduler/SchedulerImpl.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

using namespace std::chrono_literals;

constexpr auto kLiveness = 30s;  // only guards against hangs; never a timing assertion

// ---- tensors ------------------------------------------------------------------

using testing_util::Floats;
using testing_util::Fp32;

std::vector<std::byte> EncodeStrings(const std::vector<std::string>& strings) {
  std::vector<std::byte> bytes;
  for (const std::string& s : strings) {
    const uint32_t len = static_cast<uint32_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(&len);
    bytes.insert(bytes.end(), p, p + 4);
    const auto* q = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), q, q + s.size());
  }
  return bytes;
}

std::vector<std::string> DecodeStrings(const TensorData& data) {
  std::vector<std::string> strings;
  size_t pos = 0;
  while (pos + 4 <= data.size()) {
    uint32_t len;
    std::memcpy(&len, data.data() + pos, 4);
    pos += 4;
    strings.emplace_back(reinterpret_cast<const char*>(data.data() + pos), len);
    pos += len;
  }
  return strings;
}

Tensor Strings(std::string name, Shape shape, const std::vector<std::string>& strings) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kBytes;
  t.shape = std::move(shape);
  t.data = TensorData::FromVector(EncodeStrings(strings));
  return t;
}

// ---- fake model -----------------------------------------------------------------

// What every fake instance of one test shares: the gate, failure switches and
// a log of the Run calls. OUTPUT0 = INPUT0 + 1 and OUTPUT1 = INPUT0 * 2 for
// FP32; for BYTES, OUTPUT0 appends "!" and OUTPUT1 echoes.
class FakeModel {
 public:
  struct RunRecord {
    Shape shape;
    DataType dtype;
    const std::byte* data;  // to prove pass-through without copy
    std::vector<float> values;
    std::vector<std::string> strings;
  };

  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void Release(int runs) {
    std::lock_guard<std::mutex> lock(mu_);
    permits_ += runs;
    cv_.notify_all();
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void FailRunsWith(std::string message) {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = std::move(message);
  }
  void AddOutputRow() {
    std::lock_guard<std::mutex> lock(mu_);
    extra_row_ = true;
  }
  void AdvanceDuringRun(FakeSchedulerClock* clock, Clock::duration by) {
    std::lock_guard<std::mutex> lock(mu_);
    clock_ = clock;
    run_duration_ = by;
  }
  // Blocks until `n` Runs have started (liveness-guarded).
  bool WaitForRuns(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kLiveness, [&] { return runs_.size() >= n; });
  }
  std::vector<RunRecord> Runs() {
    std::lock_guard<std::mutex> lock(mu_);
    return runs_;
  }
  bool EverComputed(float marker) {
    for (const RunRecord& run : Runs())
      for (float v : run.values)
        if (v == marker) return true;
    return false;
  }

  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
    const Tensor& in = inputs.at(0);
    std::string failure;
    bool extra_row;
    FakeSchedulerClock* clock;
    Clock::duration run_duration;
    {
      std::unique_lock<std::mutex> lock(mu_);
      RunRecord record{in.shape, in.dtype, in.data.data(), {}, {}};
      if (in.dtype == DataType::kBytes) {
        record.strings = DecodeStrings(in.data);
      } else {
        record.values = Floats(in);
      }
      runs_.push_back(std::move(record));
      cv_.notify_all();
      const bool passed = cv_.wait_for(lock, kLiveness, [&] { return open_ || permits_ > 0; });
      if (!passed) return Internal("fake gate never opened");
      if (!open_) --permits_;
      failure = failure_;
      extra_row = extra_row_;
      clock = clock_;
      run_duration = run_duration_;
    }
    if (clock) clock->Advance(run_duration);
    if (!failure.empty()) return Internal(failure);

    outputs->clear();
    Shape shape = in.shape;
    if (in.dtype == DataType::kBytes) {
      std::vector<std::string> plus, same = DecodeStrings(in.data);
      for (const std::string& s : same) plus.push_back(s + "!");
      outputs->push_back(Strings("OUTPUT0", shape, plus));
      outputs->push_back(Strings("OUTPUT1", shape, same));
      return Status::Ok();
    }
    std::vector<float> x = Floats(in), plus, twice;
    for (float v : x) {
      plus.push_back(v + 1);
      twice.push_back(v * 2);
    }
    if (extra_row && !shape.empty()) {
      const size_t row = shape[0] ? x.size() / static_cast<size_t>(shape[0]) : 0;
      plus.resize(plus.size() + row);
      shape[0] += 1;
    }
    outputs->push_back(Fp32("OUTPUT0", shape, plus));
    outputs->push_back(Fp32("OUTPUT1", in.shape, twice));
    return Status::Ok();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int permits_ = 0;
  std::string failure_;
  bool extra_row_ = false;
  FakeSchedulerClock* clock_ = nullptr;
  Clock::duration run_duration_{};
  std::vector<RunRecord> runs_;
};

class FakeInstance final : public ModelInstance {
 public:
  explicit FakeInstance(std::shared_ptr<FakeModel> model) : model_(std::move(model)) {}
  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    return model_->Run(inputs, outputs);
  }
  void Terminate() override {}
  const std::vector<std::string>& OutputNames() const override { return names_; }

 private:
  std::shared_ptr<FakeModel> model_;
  std::vector<std::string> names_{"OUTPUT0", "OUTPUT1"};
};

// ---- completions ----------------------------------------------------------------

class Completions {
 public:
  CompletionCallback For(const std::string& id) {
    return [this, id](Result<InferenceResponse> result) {
      std::lock_guard<std::mutex> lock(mu_);
      auto [it, inserted] = results_.emplace(id, std::move(result));
      if (!inserted) ADD_FAILURE() << "request '" << id << "' completed twice";
      cv_.notify_all();
    };
  }
  bool Done(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return results_.count(id) > 0;
  }
  // Waits (liveness-guarded) for `id`; a missing result fails the test.
  Result<InferenceResponse> Get(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kLiveness, [&] { return results_.count(id) > 0; })) {
      ADD_FAILURE() << "request '" << id << "' never completed";
      return Internal("never completed");
    }
    return results_.at(id);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Result<InferenceResponse>> results_;
};

// ---- fixture --------------------------------------------------------------------

SchedulerOptions BatchingOptions(int max_batch_size = 8) {
  SchedulerOptions o;
  o.model_name = "fake";
  o.model_version = "3";
  o.max_batch_size = max_batch_size;
  o.dynamic_batching = true;
  // Triton's fixed window, which most batching tests pin down; the adaptive
  // window has tests of its own.
  o.adaptive_batch_window = false;
  return o;
}

class SchedulerTest : public ::testing::TestWithParam<int> {
 protected:
  size_t instances() const { return static_cast<size_t>(GetParam()); }
  uint64_t Outcome(RequestOutcome outcome) const {
    return stats_->outcomes[static_cast<size_t>(outcome)].load();
  }

  void Start(SchedulerOptions options) {
    stats_ = std::make_unique<ModelStatistics>(options.max_batch_size);
    std::vector<std::unique_ptr<ModelInstance>> list;
    for (size_t i = 0; i < instances(); ++i) list.push_back(std::make_unique<FakeInstance>(model_));
    auto created = CreateModelScheduler(std::move(options), std::move(list), stats_.get(), clock_);
    ASSERT_TRUE(created.ok()) << created.status().message();
    scheduler_ = std::move(created).value();
  }

  // A request with INPUT0 = [rows, width] holding base, base + 1, ...
  std::unique_ptr<InferenceRequest> Request(const std::string& id, int64_t rows, int64_t width,
                                            float base) {
    std::vector<float> values;
    for (int64_t i = 0; i < rows * width; ++i) values.push_back(base + static_cast<float>(i));
    auto r = std::make_unique<InferenceRequest>();
    r->model_name = "fake";
    r->id = id;
    r->inputs.push_back(Fp32("INPUT0", {rows, width}, values));
    r->arrival_time = clock_->Now();
    r->on_complete = done_.For(id);
    return r;
  }

  void Submit(std::unique_ptr<InferenceRequest> r) { scheduler_->Submit(std::move(r)); }

  // Holds every instance busy in a Run of its own ("blocker-i", marker -1).
  void OccupyAllInstances() {
    model_->Hold();
    for (size_t i = 0; i < instances(); ++i) {
      Submit(Request("blocker-" + std::to_string(i), 1, 1, -1));
      ASSERT_TRUE(model_->WaitForRuns(i + 1));
    }
    ASSERT_EQ(scheduler_->BusyInstances(), instances());
  }

  // Four requests gathered by a fixed window run as one batch of 4 rows.
  void ExpectWindowedRequestsRunWhole(SchedulerOptions options) {
    options.max_queue_delay_us = 10'000'000;
    Start(options);
    for (int i = 0; i < 4; ++i) Submit(Request("r" + std::to_string(i), 1, 4, 100.f * (i + 1)));
    clock_->Advance(10s);
    for (int i = 0; i < 4; ++i) ExpectAddOne("r" + std::to_string(i), 1, 4, 100.f * (i + 1));
    auto runs = BatchRuns();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].shape, (Shape{4, 4}));
  }

  // The Runs after the blockers.
  std::vector<FakeModel::RunRecord> BatchRuns() {
    auto runs = model_->Runs();
    std::vector<FakeModel::RunRecord> rest;
    for (auto& run : runs)
      if (run.values.empty() || run.values.front() != -1) rest.push_back(std::move(run));
    return rest;
  }

  // Expects `id` succeeded with OUTPUT0 = its input + 1 (so it got its own rows).
  void ExpectAddOne(const std::string& id, int64_t rows, int64_t width, float base) {
    auto result = done_.Get(id);
    ASSERT_TRUE(result.ok()) << id << ": " << result.status().message();
    const InferenceResponse& response = result.value();
    EXPECT_EQ(response.model_name, "fake");
    EXPECT_EQ(response.model_version, "3");
    EXPECT_EQ(response.id, id);
    ASSERT_EQ(response.outputs.size(), 2u);
    EXPECT_EQ(response.outputs[0].name, "OUTPUT0");
    EXPECT_EQ(response.outputs[0].shape, (Shape{rows, width}));
    std::vector<float> expected;
    for (int64_t i = 0; i < rows * width; ++i) expected.push_back(base + static_cast<float>(i) + 1);
    EXPECT_EQ(Floats(response.outputs[0]), expected) << id;
  }

  std::shared_ptr<FakeSchedulerClock> clock_ = std::make_shared<FakeSchedulerClock>();
  std::shared_ptr<FakeModel> model_ = std::make_shared<FakeModel>();
  Completions done_;
  std::unique_ptr<ModelStatistics> stats_;
  std::unique_ptr<ModelScheduler> scheduler_;  // declared last: shut down first
};

INSTANTIATE_TEST_SUITE_P(Instances, SchedulerTest, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "instances"; });

// ---- batching -------------------------------------------------------------------

TEST_P(SchedulerTest, RequestsQueuedWhileBusyRunAsOneBatch) {
  Start(BatchingOptions());
  OccupyAllInstances();
  for (int i = 0; i < 5; ++i) Submit(Request("r" + std::to_string(i), 1, 4, 100.f * (i + 1)));
  EXPECT_EQ(scheduler_->QueueDepth(), 5u);
  model_->Open();
  for (int i = 0; i < 5; ++i) ExpectAddOne("r" + std::to_string(i), 1, 4, 100.f * (i + 1));

  scheduler_->Shutdown();  // the blockers finish too: stats are final
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].shape, (Shape{5, 4}));
  const uint64_t n = instances();
  EXPECT_EQ(stats_->execution_count.load(), n + 1);
  EXPECT_EQ(stats_->inference_count.load(), n + 5);
  EXPECT_LT(stats_->execution_count.load(), stats_->inference_count.load());
  EXPECT_EQ(stats_->BatchStatAt(5).compute_infer.count.load(), 1u);
  EXPECT_EQ(stats_->compute_infer.count.load(), n + 5);  // per request, Triton-style
  EXPECT_EQ(scheduler_->QueueDepth(), 0u);
}

TEST_P(SchedulerTest, EachCallerGetsItsOwnRows) {
  Start(BatchingOptions());
  OccupyAllInstances();
  Submit(Request("one", 1, 3, 10));
  Submit(Request("three", 3, 3, 20));
  Submit(Request("two", 2, 3, 50));
  model_->Open();
  ExpectAddOne("one", 1, 3, 10);
  ExpectAddOne("three", 3, 3, 20);
  ExpectAddOne("two", 2, 3, 50);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].shape, (Shape{6, 3}));
}

TEST_P(SchedulerTest, IncompatibleShapesDoNotBatchTogether) {
  Start(BatchingOptions());
  OccupyAllInstances();
  Submit(Request("w4a", 1, 4, 10));
  Submit(Request("w3", 1, 3, 20));
  Submit(Request("w4b", 1, 4, 30));
  model_->Open();
  ExpectAddOne("w4a", 1, 4, 10);
  ExpectAddOne("w3", 1, 3, 20);
  ExpectAddOne("w4b", 1, 4, 30);
  std::multiset<Shape> shapes;
  for (const auto& run : BatchRuns()) shapes.insert(run.shape);
  EXPECT_EQ(shapes, (std::multiset<Shape>{{2, 4}, {1, 3}}));
}

TEST_P(SchedulerTest, BatchesNeverExceedMaxBatchSizeAndRequestsNeverSplit) {
  Start(BatchingOptions(4));
  OccupyAllInstances();
  Submit(Request("a", 2, 2, 10));
  Submit(Request("b", 2, 2, 20));
  Submit(Request("c", 1, 2, 30));
  Submit(Request("d", 3, 2, 40));
  model_->Open();
  ExpectAddOne("a", 2, 2, 10);
  ExpectAddOne("b", 2, 2, 20);
  ExpectAddOne("c", 1, 2, 30);
  ExpectAddOne("d", 3, 2, 40);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& run : runs) EXPECT_EQ(run.shape, (Shape{4, 2}));
}

TEST_P(SchedulerTest, RequestLargerThanMaxBatchSizeIsRejected) {
  Start(BatchingOptions(4));
  Submit(Request("big", 5, 1, 0));
  ASSERT_TRUE(done_.Done("big"));  // answered inside Submit
  auto result = done_.Get("big");
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("max_batch_size 4"), std::string::npos);
}

TEST_P(SchedulerTest, MalformedRequestIsRejectedBeforeItCanJoinABatch) {
  Start(BatchingOptions());
  auto r = Request("short", 2, 4, 0);
  r->inputs[0].data = r->inputs[0].data.Slice(0, 4);  // 1 float for shape [2,4]
  Submit(std::move(r));
  ASSERT_TRUE(done_.Done("short"));
  EXPECT_EQ(done_.Get("short").status().code(), StatusCode::kInvalidArgument);
}

TEST_P(SchedulerTest, PreferredBatchSizeRunsWithoutWaitingForTheWindow) {
  auto options = BatchingOptions();
  options.preferred_batch_sizes = {2};
  options.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 1, 4, 20));
  ExpectAddOne("a", 1, 4, 10);  // the fake clock has not moved
  ExpectAddOne("b", 1, 4, 20);

  Submit(Request("c", 1, 4, 30));
  EXPECT_FALSE(done_.Done("c"));  // waits for a partner or the window
  clock_->Advance(10s);
  ExpectAddOne("c", 1, 4, 30);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].shape, (Shape{2, 4}));
  EXPECT_EQ(runs[1].shape, (Shape{1, 4}));
}

TEST_P(SchedulerTest, QueueDelayGathersRequestsUntilTheWindowCloses) {
  auto options = BatchingOptions();
  options.max_queue_delay_us = 5'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 2, 4, 20));
  Submit(Request("c", 1, 4, 30));
  EXPECT_FALSE(done_.Done("a"));
  clock_->Advance(5ms);
  ExpectAddOne("a", 1, 4, 10);
  ExpectAddOne("b", 2, 4, 20);
  ExpectAddOne("c", 1, 4, 30);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].shape, (Shape{4, 4}));
}

TEST_P(SchedulerTest, FullBatchDoesNotWaitForTheWindow) {
  auto options = BatchingOptions(2);
  options.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 1, 4, 20));
  ExpectAddOne("a", 1, 4, 10);
  ExpectAddOne("b", 1, 4, 20);
}

// Balancing instances: a worker takes its share of the work in hand (the rows
// planned and those running elsewhere, over the instances), whole requests,
// and the rest runs at once on the others.
TEST_P(SchedulerTest, InstancesShareAPlannedBatch) {
  auto options = BatchingOptions();
  options.max_queue_delay_us = 10'000'000;
  options.balance_across_instances = true;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 2, 4, 20));
  Submit(Request("c", 1, 4, 40));
  Submit(Request("d", 1, 4, 50));
  EXPECT_FALSE(done_.Done("a"));  // the window gathers them first
  // 5 rows. One instance takes all. Two: a + b (share 3), then c + d (5 in
  // hand with the 3 running: share 3). Four: a (share 2: b's 2 rows do not
  // fit after a's 1), b (4 planned + 1 running: share 2), c + d (2 + 3).
  const std::map<size_t, std::multiset<int64_t>> expected{{1, {5}}, {2, {3, 2}}, {4, {1, 2, 2}}};
  // Runs held until all have started: a run ended early would change the
  // rows in hand.
  model_->Hold();
  clock_->Advance(10s);
  ASSERT_TRUE(model_->WaitForRuns(expected.at(instances()).size()));
  model_->Open();
  ExpectAddOne("a", 1, 4, 10);
  ExpectAddOne("b", 2, 4, 20);
  ExpectAddOne("c", 1, 4, 40);
  ExpectAddOne("d", 1, 4, 50);
  std::multiset<int64_t> sizes;
  for (const auto& run : BatchRuns()) sizes.insert(run.shape[0]);
  EXPECT_EQ(sizes, expected.at(instances()));
}

// Instances that cannot compute at once (compute slots) do not split it.
TEST_P(SchedulerTest, InstancesShareOnlyAsFarAsComputeSlotsGo) {
  auto options = BatchingOptions();
  options.balance_across_instances = true;
  options.compute_slots = std::make_shared<ComputeSlots>(2);
  options.compute_slots_per_run = 2;  // one run at a time
  ExpectWindowedRequestsRunWhole(options);
}

// Without the option (Triton's dispatch) the batch stays whole.
TEST_P(SchedulerTest, WithoutBalancingTheBatchStaysWhole) {
  ExpectWindowedRequestsRunWhole(BatchingOptions());
}

TEST_P(SchedulerTest, AdaptiveWindowRunsALoneRequestAtOnce) {
  auto options = BatchingOptions();
  options.max_queue_delay_us = 10'000'000;
  options.adaptive_batch_window = true;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  ExpectAddOne("a", 1, 4, 10);  // no arrival was expected: no wait (clock not moved)
}

TEST_P(SchedulerTest, AdaptiveWindowWaitsForTheClientsItAnsweredThenRunsAtOnce) {
  auto options = BatchingOptions();
  options.max_queue_delay_us = 10'000'000;
  options.adaptive_batch_window = true;
  Start(options);
  OccupyAllInstances();
  for (const char* id : {"x", "y", "z"}) Submit(Request(id, 1, 4, 10));
  model_->Open();
  const size_t n = instances();
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(done_.Get("blocker-" + std::to_string(i)).ok());
  // The n answered clients are expected back: x, y, z wait for them.
  EXPECT_FALSE(done_.Done("x"));
  for (size_t i = 0; i < n; ++i) Submit(Request("back-" + std::to_string(i), 1, 4, 50));
  // The last expected arrival closes the window; the fake clock never moved.
  ExpectAddOne("x", 1, 4, 10);
  for (size_t i = 0; i < n; ++i) ExpectAddOne("back-" + std::to_string(i), 1, 4, 50);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].shape, (Shape{static_cast<int64_t>(3 + n), 4}));

  // 3 + n clients are now expected, but only one comes back: the others'
  // expectations lapse after ArrivalForecast's patience, long before the
  // 10 s window, and are dropped.
  Submit(Request("late", 1, 4, 60));
  EXPECT_FALSE(done_.Done("late"));
  clock_->Advance(ArrivalForecast::kMinPatience);
  ExpectAddOne("late", 1, 4, 60);
  Submit(Request("next", 1, 4, 70));  // expects only "late"'s client: runs at once
  ExpectAddOne("next", 1, 4, 70);
  EXPECT_EQ(BatchRuns().size(), 3u);
}

TEST_P(SchedulerTest, WithoutDynamicBatchingEachRequestRunsAlone) {
  auto options = BatchingOptions();
  options.dynamic_batching = false;
  Start(options);
  OccupyAllInstances();
  Submit(Request("a", 2, 4, 10));
  Submit(Request("b", 2, 4, 20));
  Submit(Request("c", 1, 4, 30));
  model_->Open();
  ExpectAddOne("a", 2, 4, 10);
  ExpectAddOne("b", 2, 4, 20);
  ExpectAddOne("c", 1, 4, 30);
  scheduler_->Shutdown();  // the blockers finish too: stats are final
  EXPECT_EQ(BatchRuns().size(), 3u);
  EXPECT_EQ(stats_->inference_count.load(), instances() + 5);
  EXPECT_EQ(stats_->execution_count.load(), instances() + 3);
}

TEST_P(SchedulerTest, NoBatchDimensionPassesTensorsThroughAsIs) {
  Start(BatchingOptions(0));
  OccupyAllInstances();
  std::vector<const std::byte*> sent;
  for (int i = 0; i < 3; ++i) {
    auto r = Request("r" + std::to_string(i), 1, 4, 10.f * (i + 1));
    r->inputs[0].shape = {4};  // no batch dimension
    sent.push_back(r->inputs[0].data.data());
    Submit(std::move(r));
  }
  model_->Open();
  for (int i = 0; i < 3; ++i) {
    auto result = done_.Get("r" + std::to_string(i));
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(result.value().outputs[0].shape, (Shape{4}));
  }
  scheduler_->Shutdown();  // the blockers finish too: stats are final
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 3u);
  for (const auto& run : runs) {
    EXPECT_EQ(run.shape, (Shape{4}));
    EXPECT_NE(std::find(sent.begin(), sent.end(), run.data), sent.end()) << "input was copied";
  }
  EXPECT_EQ(stats_->inference_count.load(), instances() + 3);
  EXPECT_EQ(stats_->BatchStatAt(1).compute_infer.count.load(), instances() + 3);
}

TEST_P(SchedulerTest, SingleRequestBatchIsNotCopied) {
  Start(BatchingOptions());
  auto r = Request("solo", 2, 4, 10);
  const std::byte* sent = r->inputs[0].data.data();
  Submit(std::move(r));
  ExpectAddOne("solo", 2, 4, 10);
  ASSERT_EQ(BatchRuns().size(), 1u);
  EXPECT_EQ(BatchRuns()[0].data, sent);
}

TEST_P(SchedulerTest, BytesAreStackedAndSplitByLengthPrefix) {
  Start(BatchingOptions());
  OccupyAllInstances();
  auto a = Request("a", 1, 1, 0);
  a->inputs[0] = Strings("INPUT0", {1, 1}, {"a"});
  auto b = Request("b", 2, 1, 0);
  b->inputs[0] = Strings("INPUT0", {2, 1}, {"bb", ""});
  Submit(std::move(a));
  Submit(std::move(b));
  model_->Open();
  auto ra = done_.Get("a");
  auto rb = done_.Get("b");
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra.value().outputs[0].shape, (Shape{1, 1}));
  EXPECT_EQ(DecodeStrings(ra.value().outputs[0].data), (std::vector<std::string>{"a!"}));
  EXPECT_EQ(rb.value().outputs[0].shape, (Shape{2, 1}));
  EXPECT_EQ(DecodeStrings(rb.value().outputs[0].data), (std::vector<std::string>{"bb!", "!"}));
  EXPECT_EQ(DecodeStrings(rb.value().outputs[1].data), (std::vector<std::string>{"bb", ""}));
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].strings, (std::vector<std::string>{"a", "bb", ""}));
}

// ---- queue policies -------------------------------------------------------------

TEST_P(SchedulerTest, FullQueueRejectsAtOnceNamingTheLimit) {
  auto options = BatchingOptions();
  options.default_queue_policy.max_queue_size = 2;
  Start(options);
  OccupyAllInstances();
  Submit(Request("q1", 1, 4, 10));
  Submit(Request("q2", 1, 4, 20));
  Submit(Request("q3", 1, 4, 30));
  ASSERT_TRUE(done_.Done("q3"));
  auto rejected = done_.Get("q3");
  EXPECT_EQ(rejected.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(rejected.status().message(), "model 'fake' version '3' queue is full (max_queue_size 2)");
  model_->Open();
  ExpectAddOne("q1", 1, 4, 10);
  ExpectAddOne("q2", 1, 4, 20);
  scheduler_->Shutdown();
  EXPECT_EQ(stats_->fail.count.load(), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), stats_->success.count.load());
}

TEST_P(SchedulerTest, UnboundedPolicyUsesTheDefaultBound) {
  auto options = BatchingOptions();
  options.default_max_queue_size = 1;
  Start(options);
  OccupyAllInstances();
  Submit(Request("q1", 1, 4, 10));
  Submit(Request("q2", 1, 4, 20));
  EXPECT_NE(done_.Get("q2").status().message().find("max_queue_size 1"), std::string::npos);
  model_->Open();
  ExpectAddOne("q1", 1, 4, 10);
}

TEST_P(SchedulerTest, RequestExpiredInQueueIsAnsweredAndNeverComputed) {
  auto options = BatchingOptions();
  options.default_queue_policy.default_timeout_us = 1000;
  Start(options);
  OccupyAllInstances();
  Submit(Request("late", 1, 4, 777));
  clock_->Advance(2ms);
  Submit(Request("fresh", 1, 4, 10));
  model_->Open();
  auto late = done_.Get("late");
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(late.status().message().find("Request timeout expired"), std::string::npos);
  ExpectAddOne("fresh", 1, 4, 10);
  EXPECT_FALSE(model_->EverComputed(777));
  scheduler_->Shutdown();
  // The blockers' deadlines passed while they ran, so the run watchdog
  // (tests/unit/scheduler_run_watchdog_test.cpp) may stop each of them — or
  // Open() may release it first; either way a stopped blocker is one more
  // timeout, never a rejection.
  EXPECT_LE(stats_->terminated_executions.load(), instances());
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 1u + stats_->terminated_executions.load());
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), 0u);
}

TEST_P(SchedulerTest, ExpiryWakesAWorkerWaitingForItsWindow) {
  auto options = BatchingOptions();
  options.max_queue_delay_us = 10'000'000;
  Start(options);
  auto r = Request("t", 1, 4, 777);
  r->timeout_us = 100;  // no default timeout: the request's own applies
  Submit(std::move(r));
  clock_->Advance(200us);
  EXPECT_EQ(done_.Get("t").status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(model_->EverComputed(777));
}

TEST_P(SchedulerTest, DelayedRequestRunsAfterTheOthers) {
  auto options = BatchingOptions(0);
  options.default_queue_policy.timeout_action = QueuePolicy::TimeoutAction::kDelay;
  Start(options);
  OccupyAllInstances();
  auto d = Request("delayed", 1, 4, 500);
  d->timeout_us = 1000;
  Submit(std::move(d));
  Submit(Request("on-time", 1, 4, 600));
  clock_->Advance(2ms);
  model_->Release(1);  // frees exactly one worker
  ASSERT_TRUE(model_->WaitForRuns(instances() + 1));
  model_->Open();
  ExpectAddOne("delayed", 1, 4, 500);
  ExpectAddOne("on-time", 1, 4, 600);
  auto runs = BatchRuns();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].values.front(), 600);
  EXPECT_EQ(runs[1].values.front(), 500);
}

TEST_P(SchedulerTest, CancelledRequestIsDroppedAndNeverComputed) {
  Start(BatchingOptions());
  OccupyAllInstances();
  auto r = Request("gone", 1, 4, 777);
  r->cancelled = std::make_shared<CancelToken>();
  auto flag = r->cancelled;
  Submit(std::move(r));
  Submit(Request("kept", 1, 4, 10));
  flag->Cancel();
  model_->Open();
  EXPECT_EQ(done_.Get("gone").status().code(), StatusCode::kCancelled);
  ExpectAddOne("kept", 1, 4, 10);
  EXPECT_FALSE(model_->EverComputed(777));
  scheduler_->Shutdown();
  EXPECT_EQ(Outcome(RequestOutcome::kCancelled), 1u);
}

TEST_P(SchedulerTest, HigherPriorityRunsFirst) {
  auto options = BatchingOptions(0);
  options.priority_levels = 2;
  options.default_priority_level = 2;
  Start(options);
  OccupyAllInstances();
  auto low = Request("low", 1, 4, 200);
  low->priority = 2;
  auto unset = Request("default", 1, 4, 300);  // priority 0: level 2
  auto high = Request("high", 1, 4, 100);
  high->priority = 1;
  Submit(std::move(low));
  Submit(std::move(unset));
  Submit(std::move(high));
  model_->Release(1);
  ASSERT_TRUE(model_->WaitForRuns(instances() + 1));
  EXPECT_EQ(BatchRuns().at(0).values.front(), 100);
  model_->Open();
  ExpectAddOne("high", 1, 4, 100);
  ExpectAddOne("low", 1, 4, 200);
  ExpectAddOne("default", 1, 4, 300);
  if (instances() == 1) {  // one worker: the whole order is observable
    auto runs = BatchRuns();
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[1].values.front(), 200);
    EXPECT_EQ(runs[2].values.front(), 300);
  }
}

TEST_P(SchedulerTest, PriorityAboveTheLevelsIsInvalid) {
  auto options = BatchingOptions();
  options.priority_levels = 2;
  options.default_priority_level = 1;
  Start(options);
  auto r = Request("p", 1, 4, 0);
  r->priority = 3;
  Submit(std::move(r));
  ASSERT_TRUE(done_.Done("p"));
  EXPECT_EQ(done_.Get("p").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Outcome(RequestOutcome::kInvalidInput), 1u);
}

// ---- failures and outputs -------------------------------------------------------

TEST_P(SchedulerTest, RunFailureFailsEveryRequestOfTheBatch) {
  Start(BatchingOptions());
  OccupyAllInstances();
  model_->FailRunsWith("fake instance exploded");
  for (int i = 0; i < 3; ++i) Submit(Request("r" + std::to_string(i), 1, 4, 10));
  model_->Open();
  for (int i = 0; i < 3; ++i) {
    auto result = done_.Get("r" + std::to_string(i));
    EXPECT_EQ(result.status().code(), StatusCode::kInternal);
    EXPECT_EQ(result.status().message(), "fake instance exploded");
  }
  scheduler_->Shutdown();  // the blockers finish too: stats are final
  EXPECT_EQ(BatchRuns().size(), 1u);
  EXPECT_EQ(stats_->fail.count.load(), instances() + 3);
  EXPECT_EQ(Outcome(RequestOutcome::kInternal), instances() + 3);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 0u);
  EXPECT_EQ(stats_->request_duration.Read().count, 0u);
  EXPECT_EQ(stats_->success.count.load(), 0u);
  EXPECT_EQ(stats_->execution_count.load(), 0u);
}

TEST_P(SchedulerTest, OutputWithWrongBatchDimensionFailsNamingIt) {
  Start(BatchingOptions());
  model_->AddOutputRow();
  Submit(Request("r", 2, 4, 10));
  auto result = done_.Get("r");
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
  EXPECT_NE(result.status().message().find("'OUTPUT0'"), std::string::npos)
      << result.status().message();
}

TEST_P(SchedulerTest, RequestedOutputsComeInRequestedOrder) {
  Start(BatchingOptions());
  auto r = Request("r", 1, 2, 5);
  r->requested_outputs = {{"OUTPUT1", true}, {"OUTPUT0", false}};
  Submit(std::move(r));
  auto bad = Request("bad", 1, 2, 5);
  bad->requested_outputs = {{"NOPE", false}};
  Submit(std::move(bad));

  auto result = done_.Get("r");
  ASSERT_TRUE(result.ok()) << result.status().message();
  const auto& response = result.value();
  ASSERT_EQ(response.outputs.size(), 2u);
  ASSERT_EQ(response.requested.size(), 2u);
  EXPECT_EQ(response.outputs[0].name, "OUTPUT1");
  EXPECT_EQ(Floats(response.outputs[0]), (std::vector<float>{10, 12}));
  EXPECT_TRUE(response.requested[0].binary_data);
  EXPECT_EQ(response.outputs[1].name, "OUTPUT0");
  EXPECT_EQ(Floats(response.outputs[1]), (std::vector<float>{6, 7}));
  EXPECT_FALSE(response.requested[1].binary_data);
  EXPECT_EQ(done_.Get("bad").status().code(), StatusCode::kInvalidArgument);
}

// ---- statistics -------------------------------------------------------------------

TEST_P(SchedulerTest, StatisticsFollowTriton) {
  Start(BatchingOptions());
  model_->AdvanceDuringRun(clock_.get(), 7us);  // the only time that passes
  Submit(Request("a", 2, 4, 10));
  ExpectAddOne("a", 2, 4, 10);
  Submit(Request("b", 1, 4, 20));
  ExpectAddOne("b", 1, 4, 20);
  Submit(Request("c", 9, 4, 0));  // rejected: over max_batch_size
  EXPECT_FALSE(done_.Get("c").ok());

  EXPECT_EQ(stats_->success.count.load(), 2u);
  EXPECT_EQ(stats_->success.ns.load(), 14'000u);
  EXPECT_EQ(stats_->fail.count.load(), 1u);
  EXPECT_EQ(stats_->queue.count.load(), 2u);
  EXPECT_EQ(stats_->queue.ns.load(), 0u);
  EXPECT_EQ(stats_->compute_input.count.load(), 2u);
  EXPECT_EQ(stats_->compute_infer.count.load(), 2u);
  EXPECT_EQ(stats_->compute_infer.ns.load(), 14'000u);
  EXPECT_EQ(stats_->compute_output.count.load(), 2u);
  EXPECT_EQ(stats_->inference_count.load(), 3u);
  EXPECT_EQ(stats_->execution_count.load(), 2u);
  EXPECT_GT(stats_->last_inference_ms.load(), 0u);
  EXPECT_EQ(stats_->BatchStatAt(2).compute_infer.count.load(), 1u);
  EXPECT_EQ(stats_->BatchStatAt(2).compute_infer.ns.load(), 7'000u);
  EXPECT_EQ(stats_->BatchStatAt(1).compute_infer.count.load(), 1u);
  EXPECT_EQ(stats_->BatchStatAt(3).compute_infer.count.load(), 0u);
  EXPECT_EQ(stats_->cache_hit.count.load(), 0u);
}

// ---- shutdown ---------------------------------------------------------------------

TEST_P(SchedulerTest, ShutdownDrainsTheQueueThenRejects) {
  Start(BatchingOptions());
  OccupyAllInstances();
  for (int i = 0; i < 3; ++i) Submit(Request("r" + std::to_string(i), 1, 4, 10.f * (i + 1)));
  std::thread stopper([&] { scheduler_->Shutdown(); });
  model_->Open();
  stopper.join();
  for (int i = 0; i < 3; ++i) ExpectAddOne("r" + std::to_string(i), 1, 4, 10.f * (i + 1));
  for (size_t i = 0; i < instances(); ++i) EXPECT_TRUE(done_.Get("blocker-" + std::to_string(i)).ok());

  Submit(Request("after", 1, 4, 0));
  ASSERT_TRUE(done_.Done("after"));
  auto after = done_.Get("after");
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(after.status().message(), "model 'fake' version '3' is shutting down");
  scheduler_->Shutdown();  // idempotent
  EXPECT_EQ(scheduler_->BusyInstances(), 0u);
}

TEST_P(SchedulerTest, ShutdownPastItsDeadlineAnswersWhatIsLeftWith503) {
  Start(BatchingOptions());
  OccupyAllInstances();
  Submit(Request("queued-a", 1, 4, 777));
  Submit(Request("queued-b", 1, 4, 777));
  const Clock::time_point deadline = clock_->Now() + 30s;
  std::thread stopper([&] { scheduler_->Shutdown(deadline); });
  EXPECT_FALSE(done_.Done("queued-a"));  // still within the exit timeout
  clock_->Advance(30s);
  for (const char* id : {"queued-a", "queued-b"}) {
    auto result = done_.Get(id);
    ASSERT_FALSE(result.ok()) << id;
    EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(result.status().message().find("is shutting down"), std::string::npos)
        << result.status().message();
  }
  model_->Open();  // the fake's Terminate() cannot interrupt it: let the runs return
  stopper.join();
  const size_t n = instances();
  for (size_t i = 0; i < n; ++i) {
    auto result = done_.Get("blocker-" + std::to_string(i));
    ASSERT_FALSE(result.ok());  // stopped at the deadline, whatever the run returned
    EXPECT_NE(result.status().message().find("stopped at the exit timeout"), std::string::npos)
        << result.status().message();
  }
  EXPECT_FALSE(model_->EverComputed(777));
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), n + 2);
  EXPECT_EQ(stats_->terminated_executions.load(), n);
}

TEST_P(SchedulerTest, ShutdownWithADeadlineComputesWhatFinishesInTime) {
  Start(BatchingOptions());
  OccupyAllInstances();
  Submit(Request("queued", 1, 4, 10));
  const Clock::time_point deadline = clock_->Now() + 30s;
  std::thread stopper([&] { scheduler_->Shutdown(deadline); });
  model_->Open();  // the fake clock never reaches the deadline
  ExpectAddOne("queued", 1, 4, 10);
  stopper.join();
  for (size_t i = 0; i < instances(); ++i) EXPECT_TRUE(done_.Get("blocker-" + std::to_string(i)).ok());
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), 0u);
}

TEST_P(SchedulerTest, DestructionRunsABatchStillInItsWindow) {
  auto options = BatchingOptions();
  options.max_queue_delay_us = 10'000'000;
  Start(options);
  Submit(Request("a", 1, 4, 10));
  Submit(Request("b", 1, 4, 20));
  scheduler_.reset();
  ExpectAddOne("a", 1, 4, 10);
  ExpectAddOne("b", 1, 4, 20);
}

TEST_P(SchedulerTest, ConcurrentSubmitsAndShutdownAnswerEveryRequestOnce) {
  auto options = BatchingOptions(4);
  options.max_queue_delay_us = 0;
  Start(options);
  constexpr int kThreads = 4, kPerThread = 50;
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int n = t * kPerThread + i;
        Submit(Request("c" + std::to_string(n), 1 + n % 2, 2, static_cast<float>(n)));
      }
    });
  }
  std::thread stopper([&] { scheduler_->Shutdown(); });
  for (auto& c : clients) c.join();
  stopper.join();
  uint64_t ok = 0;
  for (int n = 0; n < kThreads * kPerThread; ++n) {
    const std::string id = "c" + std::to_string(n);
    auto result = done_.Get(id);
    if (result.ok()) {
      ++ok;
      ExpectAddOne(id, 1 + n % 2, 2, static_cast<float>(n));
    } else {
      EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().message();
    }
  }
  EXPECT_EQ(stats_->success.count.load(), ok);
}

// ---- creation -----------------------------------------------------------------------

TEST(ModelSchedulerCreate, RejectsInvalidOptions) {
  ModelStatistics stats(8);
  auto make = [&](SchedulerOptions o, int n) {
    std::vector<std::unique_ptr<ModelInstance>> list;
    auto model = std::make_shared<FakeModel>();
    for (int i = 0; i < n; ++i) list.push_back(std::make_unique<FakeInstance>(model));
    return ModelScheduler::Create(std::move(o), std::move(list), &stats);
  };
  EXPECT_FALSE(make(BatchingOptions(), 0).ok());
  auto preferred = BatchingOptions(4);
  preferred.preferred_batch_sizes = {8};
  EXPECT_EQ(make(preferred, 1).status().code(), StatusCode::kInvalidArgument);
  auto priority = BatchingOptions();
  priority.priority_levels = 2;
  priority.default_priority_level = 0;
  EXPECT_FALSE(make(priority, 1).ok());
  priority.default_priority_level = 1;
  priority.priority_queue_policies = {{3, QueuePolicy{}}};
  EXPECT_FALSE(make(priority, 1).ok());
  EXPECT_TRUE(make(BatchingOptions(), 2).ok());
}

TEST(ModelSchedulerCreate, RealClockBatchesConcurrentTraffic) {
  ModelStatistics stats(4);
  auto model = std::make_shared<FakeModel>();
  std::vector<std::unique_ptr<ModelInstance>> list;
  for (int i = 0; i < 2; ++i) list.push_back(std::make_unique<FakeInstance>(model));
  auto options = BatchingOptions(4);
  options.max_queue_delay_us = 500;
  Completions done;  // outlives the scheduler, which may still call back
  auto created = ModelScheduler::Create(options, std::move(list), &stats);
  ASSERT_TRUE(created.ok());
  auto scheduler = std::move(created).value();
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto r = std::make_unique<InferenceRequest>();
        r->id = std::to_string(t * 25 + i);
        r->inputs.push_back(Fp32("INPUT0", {1, 1}, {static_cast<float>(t * 25 + i)}));
        r->on_complete = done.For(r->id);
        scheduler->Submit(std::move(r));
      }
    });
  }
  for (auto& c : clients) c.join();
  for (int n = 0; n < 100; ++n) {
    auto result = done.Get(std::to_string(n));
    ASSERT_TRUE(result.ok()) << result.status().message();
    EXPECT_EQ(Floats(result.value().outputs[0]), (std::vector<float>{n + 1.f}));
  }
  scheduler.reset();
  EXPECT_EQ(stats.inference_count.load(), 100u);
  EXPECT_EQ(stats.success.count.load(), 100u);
}

}  // namespace
}  // namespace ortserve
