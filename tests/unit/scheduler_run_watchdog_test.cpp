// The scheduler's run watchdog (deadlines and cancellation reaching into a
// running batch) and its load estimate, driven by a fake clock and a fake
// instance whose Run blocks until it is terminated or let through. Nothing
// here sleeps or asserts on timing.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fakes/FakeSchedulerClock.h"
#include "scheduler/SchedulerImpl.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

using namespace std::chrono_literals;

constexpr auto kLiveness = 30s;  // only guards against hangs

using testing_util::Floats;
using testing_util::Fp32;

// Shared by the fake instances of one test. Run blocks until Terminate() (then
// kCancelled, as OrtModelInstance) or a permit; a Terminate outside a Run does
// nothing, as with ORT.
class Gate {
 public:
  void Permit(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    permits_ += n;
    cv_.notify_all();
  }
  bool WaitForRuns(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kLiveness, [&] { return runs_ >= n; });
  }
  int terminations() {
    std::lock_guard<std::mutex> lock(mu_);
    return terminations_;
  }
  // While a Run blocks, moves the fake clock (the run "takes" that long).
  void AdvanceBeforeReturn(FakeSchedulerClock* clock, Clock::duration by) {
    std::lock_guard<std::mutex> lock(mu_);
    clock_ = clock;
    by_ = by;
  }

  Status Run(int slot, const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
    FakeSchedulerClock* clock = nullptr;
    Clock::duration by{};
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++runs_;
      in_run_[slot] = true;
      terminate_[slot] = false;
      cv_.notify_all();
      const bool woke = cv_.wait_for(lock, kLiveness, [&] { return terminate_[slot] || permits_ > 0; });
      in_run_[slot] = false;
      if (!woke) return Internal("gate never opened");
      if (terminate_[slot]) return Status(StatusCode::kCancelled, "terminated");
      --permits_;
      clock = clock_;
      by = by_;
    }
    if (clock) clock->Advance(by);
    std::vector<float> x = Floats(inputs.at(0));
    for (float& v : x) v += 1;
    outputs->clear();
    outputs->push_back(Fp32("OUTPUT0", inputs.at(0).shape, x));
    return Status::Ok();
  }
  void Terminate(int slot) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!in_run_[slot]) return;
    terminate_[slot] = true;
    ++terminations_;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int runs_ = 0;
  int permits_ = 0;
  int terminations_ = 0;
  std::map<int, bool> in_run_, terminate_;
  FakeSchedulerClock* clock_ = nullptr;
  Clock::duration by_{};
};

class GatedInstance final : public ModelInstance {
 public:
  GatedInstance(std::shared_ptr<Gate> gate, int slot) : gate_(std::move(gate)), slot_(slot) {}
  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    return gate_->Run(slot_, inputs, outputs);
  }
  void Terminate() override { gate_->Terminate(slot_); }
  const std::vector<std::string>& OutputNames() const override { return names_; }

 private:
  std::shared_ptr<Gate> gate_;
  int slot_;
  std::vector<std::string> names_{"OUTPUT0"};
};

class Completions {
 public:
  CompletionCallback For(const std::string& id) {
    return [this, id](Result<InferenceResponse> result) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!results_.emplace(id, std::move(result)).second) ADD_FAILURE() << id << " completed twice";
      cv_.notify_all();
    };
  }
  Result<InferenceResponse> Get(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kLiveness, [&] { return results_.count(id) > 0; })) {
      ADD_FAILURE() << id << " never completed";
      return Internal("never completed");
    }
    return results_.at(id);
  }
  bool Done(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return results_.count(id) > 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Result<InferenceResponse>> results_;
};

class RunWatchdogTest : public ::testing::Test {
 protected:
  void Start(int instances = 1, int max_batch_size = 8) {
    SchedulerOptions o;
    o.model_name = "fake";
    o.model_version = "1";
    o.max_batch_size = max_batch_size;
    o.dynamic_batching = max_batch_size > 0;
    stats_ = std::make_unique<ModelStatistics>(max_batch_size);
    std::vector<std::unique_ptr<ModelInstance>> list;
    for (int i = 0; i < instances; ++i) list.push_back(std::make_unique<GatedInstance>(gate_, i));
    auto created = CreateModelScheduler(std::move(o), std::move(list), stats_.get(), clock_);
    ASSERT_TRUE(created.ok()) << created.status().message();
    scheduler_ = std::move(created).value();
  }

  std::unique_ptr<InferenceRequest> Request(const std::string& id, float value, uint64_t timeout_us = 0,
                                            CancelFlag cancelled = nullptr) {
    auto r = std::make_unique<InferenceRequest>();
    r->model_name = "fake";
    r->id = id;
    r->inputs.push_back(Fp32("INPUT0", {1, 2}, {value, value}));
    r->timeout_us = timeout_us;
    r->cancelled = std::move(cancelled);
    r->arrival_time = clock_->Now();
    r->on_complete = done_.For(id);
    return r;
  }

  uint64_t Outcome(RequestOutcome o) const { return stats_->outcomes[static_cast<size_t>(o)].load(); }

  // Advances the clock and waits until the watchdog (the only thread waiting
  // on the clock while the single instance runs) has looked at the new time.
  void AdvanceAndSettle(Clock::duration by) {
    const uint64_t before = clock_->WaitsStarted();
    clock_->Advance(by);
    for (int i = 0; i < 30000 && clock_->WaitsStarted() == before; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_GT(clock_->WaitsStarted(), before) << "the watchdog never re-checked";
  }

  void ExpectSuccess(const std::string& id, float value) {
    auto result = done_.Get(id);
    ASSERT_TRUE(result.ok()) << id << ": " << result.status().message();
    EXPECT_EQ(Floats(result.value().outputs.at(0)), (std::vector<float>{value + 1, value + 1})) << id;
  }

  std::shared_ptr<FakeSchedulerClock> clock_ = std::make_shared<FakeSchedulerClock>();
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  Completions done_;
  std::unique_ptr<ModelStatistics> stats_;
  std::unique_ptr<ModelScheduler> scheduler_;  // last: shut down first
};

TEST_F(RunWatchdogTest, ExpiredBatchIsTerminatedAnsweredTimeoutAndTheInstanceServesOn) {
  Start();
  scheduler_->Submit(Request("late", 1, /*timeout_us=*/1000));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  clock_->Advance(2ms);  // past its deadline, mid-run

  auto late = done_.Get("late");
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(late.status().message().find("Request timeout expired"), std::string::npos)
      << late.status().message();
  EXPECT_NE(late.status().message().find("terminated"), std::string::npos);
  EXPECT_EQ(gate_->terminations(), 1);
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 0u);
  EXPECT_EQ(Outcome(RequestOutcome::kInternal), 0u);
  EXPECT_EQ(stats_->terminated_executions.load(), 1u);
  EXPECT_EQ(stats_->execution_count.load(), 0u);
  EXPECT_EQ(stats_->fail.count.load(), 1u);

  // The instance is free again and serves the next batch normally.
  gate_->Permit(1);
  scheduler_->Submit(Request("next", 5, /*timeout_us=*/1000));
  ExpectSuccess("next", 5);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 1u);
  EXPECT_EQ(gate_->terminations(), 1);
  EXPECT_EQ(scheduler_->BusyInstances(), 0u);
}

TEST_F(RunWatchdogTest, BatchWithOneLiveRequestIsNotTerminated) {
  Start();
  scheduler_->Submit(Request("blocker", 0));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  scheduler_->Submit(Request("short", 1, /*timeout_us=*/1000));
  scheduler_->Submit(Request("long", 2, /*timeout_us=*/10'000'000));
  gate_->Permit(1);  // the blocker finishes; short + long run as one batch
  ASSERT_TRUE(gate_->WaitForRuns(2));
  ExpectSuccess("blocker", 0);

  AdvanceAndSettle(2ms);  // "short" is past its deadline, "long" is not
  EXPECT_EQ(gate_->terminations(), 0);
  AdvanceAndSettle(5s);
  EXPECT_EQ(gate_->terminations(), 0);
  EXPECT_FALSE(done_.Done("short"));

  gate_->Permit(1);
  ExpectSuccess("short", 1);  // it started before its deadline: answered
  ExpectSuccess("long", 2);
  EXPECT_EQ(Outcome(RequestOutcome::kSuccess), 3u);
  EXPECT_EQ(stats_->terminated_executions.load(), 0u);
}

TEST_F(RunWatchdogTest, LastLiveDeadlinePassingTerminatesTheBatch) {
  Start();
  scheduler_->Submit(Request("blocker", 0));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  scheduler_->Submit(Request("a", 1, /*timeout_us=*/1000));
  scheduler_->Submit(Request("b", 2, /*timeout_us=*/50'000));
  gate_->Permit(1);
  ASSERT_TRUE(gate_->WaitForRuns(2));
  AdvanceAndSettle(2ms);
  EXPECT_EQ(gate_->terminations(), 0);
  clock_->Advance(60ms);
  for (const char* id : {"a", "b"}) {
    auto r = done_.Get(id);
    ASSERT_FALSE(r.ok()) << id;
    EXPECT_NE(r.status().message().find("Request timeout expired"), std::string::npos);
  }
  EXPECT_EQ(gate_->terminations(), 1);
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 2u);
  EXPECT_EQ(stats_->terminated_executions.load(), 1u);
}

TEST_F(RunWatchdogTest, CancelledRequestsTerminateTheRun) {
  Start();
  auto flag = std::make_shared<CancelToken>();
  scheduler_->Submit(Request("gone", 1, /*timeout_us=*/0, flag));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  clock_->Advance(1s);  // no deadline: time alone never ends it
  EXPECT_EQ(gate_->terminations(), 0);
  flag->Cancel();  // wakes the watchdog itself, the clock standing still

  auto r = done_.Get("gone");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(Outcome(RequestOutcome::kCancelled), 1u);
  EXPECT_EQ(stats_->terminated_executions.load(), 1u);

  gate_->Permit(1);
  scheduler_->Submit(Request("after", 3));
  ExpectSuccess("after", 3);
}

TEST_F(RunWatchdogTest, MixOfCancelledAndExpiredIsTerminatedEachWithItsReason) {
  Start();
  scheduler_->Submit(Request("blocker", 0));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  auto flag = std::make_shared<CancelToken>();
  scheduler_->Submit(Request("cancelled", 1, /*timeout_us=*/0, flag));
  scheduler_->Submit(Request("expired", 2, /*timeout_us=*/1000));
  gate_->Permit(1);
  ASSERT_TRUE(gate_->WaitForRuns(2));
  // "expired" is dead, "cancelled" alive (no deadline): nothing to wait for
  // until a cancellation.
  clock_->Advance(2ms);
  EXPECT_EQ(gate_->terminations(), 0);
  flag->Cancel();
  EXPECT_EQ(done_.Get("cancelled").status().code(), StatusCode::kCancelled);
  EXPECT_EQ(done_.Get("expired").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(Outcome(RequestOutcome::kCancelled), 1u);
  EXPECT_EQ(Outcome(RequestOutcome::kTimeout), 1u);
  EXPECT_EQ(gate_->terminations(), 1);
}

TEST_F(RunWatchdogTest, OnlyTheDeadBatchOfTwoInstancesIsTerminated) {
  Start(/*instances=*/2);
  scheduler_->Submit(Request("dies", 1, /*timeout_us=*/1000));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  scheduler_->Submit(Request("lives", 2, /*timeout_us=*/10'000'000));
  ASSERT_TRUE(gate_->WaitForRuns(2));
  clock_->Advance(2ms);
  EXPECT_EQ(done_.Get("dies").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(gate_->terminations(), 1);
  gate_->Permit(1);
  ExpectSuccess("lives", 2);
}

TEST_F(RunWatchdogTest, ShutdownWithAWatchedRunFinishesIt) {
  Start();
  scheduler_->Submit(Request("r", 1, /*timeout_us=*/10'000'000));
  ASSERT_TRUE(gate_->WaitForRuns(1));
  gate_->Permit(1);
  scheduler_->Shutdown();
  ExpectSuccess("r", 1);
}

TEST_F(RunWatchdogTest, TrySubmitKeepsTheRequestWhenTheQueueIsFull) {
  SchedulerOptions o;
  o.model_name = "fake";
  o.model_version = "1";
  o.default_max_queue_size = 1;
  stats_ = std::make_unique<ModelStatistics>(0);
  std::vector<std::unique_ptr<ModelInstance>> list;
  list.push_back(std::make_unique<GatedInstance>(gate_, 0));
  auto created = CreateModelScheduler(std::move(o), std::move(list), stats_.get(), clock_);
  ASSERT_TRUE(created.ok());
  scheduler_ = std::move(created).value();

  auto running = Request("running", 1);
  ASSERT_TRUE(scheduler_->TrySubmit(running).ok());
  EXPECT_EQ(running, nullptr);
  ASSERT_TRUE(gate_->WaitForRuns(1));
  auto queued = Request("queued", 2);
  ASSERT_TRUE(scheduler_->TrySubmit(queued).ok());
  auto extra = Request("extra", 3);
  Status full = scheduler_->TrySubmit(extra);
  EXPECT_EQ(full.code(), StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("queue is full"), std::string::npos) << full.message();
  ASSERT_NE(extra, nullptr);  // still ours: not completed, not counted
  EXPECT_FALSE(done_.Done("extra"));
  EXPECT_EQ(Outcome(RequestOutcome::kRejected), 0u);
  gate_->Permit(2);
  ExpectSuccess("running", 1);
  ExpectSuccess("queued", 2);
}

TEST_F(RunWatchdogTest, ExpectedWaitUsesQueueDepthAndAverageExecution) {
  Start(/*instances=*/1, /*max_batch_size=*/0);
  const auto probe = [&](uint64_t timeout_us) {
    auto r = Request("probe", 0, timeout_us);
    return scheduler_->ExpectedToMissDeadline(*r);
  };
  EXPECT_FALSE(probe(1)) << "no execution measured yet: no estimate";
  gate_->AdvanceBeforeReturn(clock_.get(), 100ms);  // every run "takes" 100 ms
  gate_->Permit(1);
  scheduler_->Submit(Request("first", 1));
  ExpectSuccess("first", 1);

  scheduler_->Submit(Request("busy", 2));
  ASSERT_TRUE(gate_->WaitForRuns(2));
  for (int i = 0; i < 3; ++i) scheduler_->Submit(Request("q" + std::to_string(i), 3));
  EXPECT_EQ(scheduler_->QueueDepth(), 3u);
  EXPECT_TRUE(probe(250'000));   // 3 x 100 ms ahead
  EXPECT_FALSE(probe(400'000));
  EXPECT_FALSE(probe(0));        // no timeout: never misses
  gate_->Permit(4);
  for (int i = 0; i < 3; ++i) ExpectSuccess("q" + std::to_string(i), 3);
}

}  // namespace
}  // namespace ortserve
