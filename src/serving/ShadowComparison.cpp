#include "serving/ShadowComparison.h"

#include <algorithm>

namespace ortserve {
namespace {

// Buckets of the largest absolute difference of one comparison: decades
// 1e-9 .. 1e3, in units of 1 / kShadowDifferenceScale.
Histogram DifferenceBuckets() {
  return Histogram{1, 10, 100, 1'000, 10'000, 100'000, 1'000'000, 10'000'000, 100'000'000, 1'000'000'000,
                   10'000'000'000, 100'000'000'000, 1'000'000'000'000};
}

uint64_t Scaled(double difference) {
  // Infinite differences (NaN on one side) land above every bucket without
  // overflowing the histogram's sum.
  const double capped = std::min(difference, 1e6) * kShadowDifferenceScale;
  return static_cast<uint64_t>(std::llround(capped));
}

}  // namespace

ShadowComparison::OutputFigures::OutputFigures(std::string n)
    : name(std::move(n)), abs_difference(DifferenceBuckets()) {}

ShadowComparison::ShadowComparison(std::string model, std::string version, const ShadowConfig& config,
                                   std::vector<std::string> outputs, size_t max_in_flight, Submit submit)
    : model_(std::move(model)),
      version_(std::move(version)),
      config_(config),
      max_in_flight_(std::max<size_t>(1, max_in_flight)),
      submit_(std::move(submit)),
      sampler_(config.fraction) {
  MutexLock lock(mu_);
  for (std::string& name : outputs) outputs_.push_back(std::make_unique<OutputFigures>(std::move(name)));
}

std::shared_ptr<InferenceRequest> ShadowComparison::Sample(const InferenceRequest& request) {
  if (!sampler_.Take()) return nullptr;
  auto copy = std::make_shared<InferenceRequest>();
  copy->model_name = request.model_name;
  copy->model_version = std::to_string(config_.version);
  copy->id = request.id;
  copy->inputs = request.inputs;  // shared bytes
  copy->requested_outputs = request.requested_outputs;
  return copy;
}

void ShadowComparison::Attach(InferenceRequest& request, std::shared_ptr<InferenceRequest> copy) {
  request.on_complete = [self = shared_from_this(), copy = std::move(copy),
                         done = std::move(request.on_complete)](Result<InferenceResponse> result) mutable {
    // Only this version's own successful answer is compared (not a
    // fallback model's, not an error).
    const bool compare = result.ok() && result->model_name == self->model_ && result->model_version == self->version_;
    std::vector<Tensor> served;
    if (compare) served = result->outputs;  // shared bytes
    if (done) done(std::move(result));  // the real answer first
    if (compare) self->Run(std::move(copy), std::move(served));
  };
}

void ShadowComparison::Run(std::shared_ptr<InferenceRequest> copy, std::vector<Tensor> served) {
  if (in_flight_.fetch_add(1, std::memory_order_acq_rel) >= max_in_flight_) {
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  auto request = std::make_unique<InferenceRequest>(std::move(*copy));
  request->arrival_time = Clock::now();
  request->on_complete = [self = shared_from_this(), served = std::move(served)](Result<InferenceResponse> result) {
    self->Finish(served, std::move(result));
  };
  if (submit_ && submit_(request)) return;
  in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  dropped_.fetch_add(1, std::memory_order_relaxed);
}

void ShadowComparison::Finish(const std::vector<Tensor>& served, Result<InferenceResponse> result) {
  if (result.ok()) {
    Record(served, result->outputs);
  } else {
    MutexLock lock(mu_);
    last_failure_ = result.status().message();
  }
  // The run is over before it shows in the counts: whoever waits for a count
  // finds room for the next shadow run.
  in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  (result.ok() ? compared_ : failed_).fetch_add(1, std::memory_order_relaxed);
}

ShadowComparison::OutputFigures* ShadowComparison::FiguresOf(const std::string& output) {
  for (auto& f : outputs_) {
    if (f->name == output) return f.get();
  }
  outputs_.push_back(std::make_unique<OutputFigures>(output));
  return outputs_.back().get();
}

void ShadowComparison::Compare(const std::vector<Tensor>& served, const std::vector<Tensor>& shadow) {
  Record(served, shadow);
  compared_.fetch_add(1, std::memory_order_relaxed);
}

void ShadowComparison::Record(const std::vector<Tensor>& served, const std::vector<Tensor>& shadow) {
  MutexLock lock(mu_);
  for (const Tensor& expected : served) {
    OutputFigures& f = *FiguresOf(expected.name);
    const Tensor* actual = FindTensor(shadow, expected.name);
    if (!actual) {
      ++f.mismatches;
      f.last_mismatch = "the shadow version's answer has no output '" + expected.name + "'";
      continue;
    }
    const OutputComparison compared = CompareOutput(*actual, expected, config_.tolerance);
    if (compared.structural()) f.last_mismatch = compared.report.detail;
    f.mismatches += compared.mismatch() ? 1 : 0;
    f.tally.Add(compared);
    f.abs_difference.Observe(Scaled(compared.report.max_abs_error));
  }
}

ShadowSummary ShadowComparison::Snapshot() const {
  ShadowSummary s;
  s.model = model_;
  s.version = version_;
  s.shadow_version = config_.version;
  s.fraction = config_.fraction;
  s.tolerance = config_.tolerance;
  s.compared = compared_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  MutexLock lock(mu_);
  s.last_failure = last_failure_;
  for (const auto& f : outputs_) {
    s.outputs.push_back({f->name, f->mismatches, f->tally.max_abs, f->tally.max_rel, f->tally.has_classes,
                         f->tally.top1.agreeing, f->tally.top1.rows, f->last_mismatch, f->abs_difference.Read()});
  }
  return s;
}

}  // namespace ortserve
