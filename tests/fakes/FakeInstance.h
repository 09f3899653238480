#pragma once
// A fake model instance for scheduler tests, controlled by one
// FakeInstanceControl that all instances of a test share. Its Run computes
// OUTPUT0 = INPUT0 + 1 and OUTPUT1 = INPUT0 * 2 for FP32 (for BYTES: OUTPUT0
// appends "!", OUTPUT1 echoes), of whichever of the two the instance names,
// and records what it was given (INPUT0's values, and every input by name).
// With a state loop (sequence batcher tests) an output named like the loop's
// output is its input + INPUT0, elementwise (an accumulator of implicit
// state). It can be held at a gate (so that tests
// decide when runs finish and thus which requests batch together), failed,
// made to return a malformed output, or made to advance a fake clock while
// it runs. Terminate() stops a Run blocked at the gate with kCancelled, as
// ONNX Runtime's run termination does; outside a Run it does nothing.
// Thread-safe.
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fakes/FakeSchedulerClock.h"
#include "runtime/ModelInstance.h"

namespace ortserve {

class FakeInstanceControl {
 public:
  struct RunRecord {
    Shape shape;
    DataType dtype;
    const std::byte* data;  // to prove pass-through without copy
    std::vector<float> values;
    std::vector<std::string> strings;
    std::map<std::string, Tensor> inputs;  // every input, sharing the run's data
    std::thread::id thread = std::this_thread::get_id();  // the thread that ran it
  };

  // The gate: open by default. Hold() closes it; Release(n) lets n runs
  // through; Open() lets every run through.
  void Hold();
  void Release(int runs);
  void Open();
  void FailRunsWith(std::string message);
  // OUTPUT0 gets one row more than the input had.
  void AddOutputRow();
  // Each run advances `clock` by `by` once through the gate.
  void AdvanceDuringRun(FakeSchedulerClock* clock, Clock::duration by);
  // Output `output` (FP32) = input `input` + INPUT0, with `input`'s shape;
  // `wrong_shape`: one element short of it (a model breaking its state).
  void LoopState(std::string input, std::string output, bool wrong_shape = false);

  // Blocks until `n` runs have started; false after a long liveness bound.
  bool WaitForRuns(size_t n);
  std::vector<RunRecord> Runs();
  // Whether any run saw the value `marker` in INPUT0.
  bool EverComputed(float marker);
  int terminations();

  Status Run(int slot, const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
             std::vector<Tensor>* outputs);
  void Terminate(int slot);

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
  std::string state_input_, state_output_;
  bool state_wrong_shape_ = false;
  int terminations_ = 0;
  std::map<int, bool> in_run_, terminate_;
};

class FakeInstance final : public ModelInstance {
 public:
  FakeInstance(std::shared_ptr<FakeInstanceControl> control, int slot,
               std::vector<std::string> output_names = {"OUTPUT0", "OUTPUT1"})
      : control_(std::move(control)), slot_(slot), names_(std::move(output_names)) {}
  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    return control_->Run(slot_, names_, inputs, outputs);
  }
  void Terminate() override { control_->Terminate(slot_); }
  const std::vector<std::string>& OutputNames() const override { return names_; }

 private:
  std::shared_ptr<FakeInstanceControl> control_;
  int slot_;
  std::vector<std::string> names_;
};

// `n` instances sharing `control`, slots 0..n-1.
std::vector<std::unique_ptr<ModelInstance>> MakeFakeInstances(const std::shared_ptr<FakeInstanceControl>& control,
                                                              size_t n,
                                                              std::vector<std::string> output_names = {"OUTPUT0",
                                                                                                       "OUTPUT1"});

}  // namespace ortserve
