#include "fakes/FakeInstance.h"

#include <chrono>

#include "unit/TestTensors.h"

namespace ortserve {
namespace {

using testing_util::DecodeStrings;
using testing_util::Floats;
using testing_util::Fp32;
using testing_util::Strings;

constexpr auto kLiveness = std::chrono::seconds(30);  // only guards against hangs

// `output` = input `state_name` + INPUT0's values `x`, elementwise.
Tensor StateOutput(const std::vector<Tensor>& inputs, const std::string& state_name, const std::string& output,
                   const std::vector<float>& x, bool wrong_shape) {
  const Tensor* state = nullptr;
  for (const Tensor& t : inputs)
    if (t.name == state_name) state = &t;
  if (state == nullptr) return Fp32(output, {0}, {});
  std::vector<float> next = Floats(*state);
  for (size_t i = 0; i < next.size() && i < x.size(); ++i) next[i] += x[i];
  Shape shape = state->shape;
  if (wrong_shape && !next.empty()) {
    next.pop_back();
    shape.back() -= 1;
  }
  return Fp32(output, shape, next);
}

}  // namespace

void FakeInstanceControl::Hold() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = false;
}

void FakeInstanceControl::Release(int runs) {
  std::lock_guard<std::mutex> lock(mu_);
  permits_ += runs;
  cv_.notify_all();
}

void FakeInstanceControl::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  cv_.notify_all();
}

void FakeInstanceControl::FailRunsWith(std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  failure_ = std::move(message);
}

void FakeInstanceControl::AddOutputRow() {
  std::lock_guard<std::mutex> lock(mu_);
  extra_row_ = true;
}

void FakeInstanceControl::AdvanceDuringRun(FakeSchedulerClock* clock, Clock::duration by) {
  std::lock_guard<std::mutex> lock(mu_);
  clock_ = clock;
  run_duration_ = by;
}

void FakeInstanceControl::LoopState(std::string input, std::string output, bool wrong_shape) {
  std::lock_guard<std::mutex> lock(mu_);
  state_input_ = std::move(input);
  state_output_ = std::move(output);
  state_wrong_shape_ = wrong_shape;
}

bool FakeInstanceControl::WaitForRuns(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, kLiveness, [&] { return runs_.size() >= n; });
}

std::vector<FakeInstanceControl::RunRecord> FakeInstanceControl::Runs() {
  std::lock_guard<std::mutex> lock(mu_);
  return runs_;
}

bool FakeInstanceControl::EverComputed(float marker) {
  for (const RunRecord& run : Runs())
    for (float v : run.values)
      if (v == marker) return true;
  return false;
}

int FakeInstanceControl::terminations() {
  std::lock_guard<std::mutex> lock(mu_);
  return terminations_;
}

void FakeInstanceControl::Terminate(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!in_run_[slot]) return;
  terminate_[slot] = true;
  ++terminations_;
  cv_.notify_all();
}

Status FakeInstanceControl::Run(int slot, const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                                std::vector<Tensor>* outputs) {
  const Tensor& in = inputs.at(0);
  std::string failure;
  bool extra_row;
  FakeSchedulerClock* clock;
  Clock::duration run_duration;
  std::string state_input, state_output;
  bool state_wrong_shape;
  {
    std::unique_lock<std::mutex> lock(mu_);
    RunRecord record{in.shape, in.dtype, in.data.data(), {}, {}, {}};
    for (const Tensor& t : inputs) record.inputs[t.name] = t;
    if (in.dtype == DataType::kBytes) {
      record.strings = DecodeStrings(in.data);
    } else {
      record.values = Floats(in);
    }
    runs_.push_back(std::move(record));
    in_run_[slot] = true;
    terminate_[slot] = false;
    cv_.notify_all();
    const bool passed = cv_.wait_for(lock, kLiveness, [&] { return open_ || permits_ > 0 || terminate_[slot]; });
    in_run_[slot] = false;
    if (!passed) return Internal("fake gate never opened");
    if (terminate_[slot]) return Status(StatusCode::kCancelled, "terminated");
    if (!open_) --permits_;
    failure = failure_;
    extra_row = extra_row_;
    clock = clock_;
    run_duration = run_duration_;
    state_input = state_input_;
    state_output = state_output_;
    state_wrong_shape = state_wrong_shape_;
  }
  if (clock) clock->Advance(run_duration);
  if (!failure.empty()) return Internal(failure);

  outputs->clear();
  if (in.dtype == DataType::kBytes) {
    std::vector<std::string> plus, same = DecodeStrings(in.data);
    for (const std::string& s : same) plus.push_back(s + "!");
    for (const std::string& name : names) outputs->push_back(Strings(name, in.shape, name == "OUTPUT0" ? plus : same));
    return Status::Ok();
  }
  Shape shape = in.shape;
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
  for (const std::string& name : names) {
    if (!state_output.empty() && name == state_output) {
      outputs->push_back(StateOutput(inputs, state_input, name, x, state_wrong_shape));
      continue;
    }
    outputs->push_back(name == "OUTPUT0" ? Fp32(name, shape, plus) : Fp32(name, in.shape, twice));
  }
  return Status::Ok();
}

std::vector<std::unique_ptr<ModelInstance>> MakeFakeInstances(const std::shared_ptr<FakeInstanceControl>& control,
                                                              size_t n, std::vector<std::string> output_names) {
  std::vector<std::unique_ptr<ModelInstance>> list;
  for (size_t i = 0; i < n; ++i) {
    list.push_back(std::make_unique<FakeInstance>(control, static_cast<int>(i), output_names));
  }
  return list;
}

}  // namespace ortserve
