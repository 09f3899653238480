// The request-path cost of input drift statistics (serving/InputDrift.h):
// InputDrift::Observe on the tiny bench model's request (two FP32 [1,16]
// inputs, 32 values), single-threaded, once the reference is fixed (the
// steady state: every request counted, drift_sample_fraction 1, and at the
// default fraction), and while it is being recorded. Prints ns per Observe, the
// median of several runs. Usage: ortserve_drift_bench [observations per run,
// default 2000000].
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "serving/InputDrift.h"

namespace {

using namespace ortserve;

Tensor Fp32(const char* name, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(16);
  for (float& v : values) v = normal(rng);
  Tensor t;
  t.name = name;
  t.dtype = DataType::kFp32;
  t.shape = {1, 16};
  t.data = TensorData::Copy(values.data(), values.size() * sizeof(float));
  return t;
}

// ns per Observe over `count` observations of `requests`, cycled.
double NsPerObserve(InputDrift& drift, const std::vector<InferenceRequest>& requests, long count) {
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < count; ++i) drift.Observe(requests[static_cast<size_t>(i) % requests.size()]);
  const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / static_cast<double>(count);
}

}  // namespace

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 2'000'000;
  inference::ModelConfig config;
  if (!google::protobuf::TextFormat::ParseFromString(R"(name: "tiny" max_batch_size: 64
      input { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }
      input { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] })", &config)) {
    std::abort();
  }
  std::mt19937 rng(1);
  std::vector<InferenceRequest> requests(1024);
  for (InferenceRequest& r : requests) {
    r.inputs.push_back(Fp32("INPUT0", rng));
    r.inputs.push_back(Fp32("INPUT1", rng));
  }
  DriftConfig full;
  full.baseline_requests = 1000;
  full.sample_fraction = 1.0;
  DriftConfig sampled = full;
  sampled.sample_fraction = kDriftDefaultSampleFraction;
  std::vector<double> steady, steady_sampled, recording;
  for (int run = 0; run < 7; ++run) {
    for (const DriftConfig* drift_config : {&full, &sampled}) {
      InputDrift drift(config, *drift_config, nullptr);
      const double recorded = NsPerObserve(drift, requests, 999);
      NsPerObserve(drift, requests, 1);  // fixes the reference
      const double ns = NsPerObserve(drift, requests, count);
      if (drift_config == &full) {
        recording.push_back(recorded);
        steady.push_back(ns);
      } else {
        steady_sampled.push_back(ns);
      }
    }
  }
  std::sort(steady.begin(), steady.end());
  std::sort(steady_sampled.begin(), steady_sampled.end());
  std::sort(recording.begin(), recording.end());
  std::printf("ns per Observe, tiny's request (2 x FP32 [1,16]), median of 7 runs: steady, every request %.1f "
              "(runs %.1f-%.1f), steady, sample fraction %g %.1f (runs %.1f-%.1f), recording %.1f\n",
              steady[3], steady.front(), steady.back(), kDriftDefaultSampleFraction, steady_sampled[3],
              steady_sampled.front(), steady_sampled.back(), recording[3]);
  return 0;
}
