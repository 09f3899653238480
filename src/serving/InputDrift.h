#pragma once
// Input drift statistics of one model version (docs/model-config.md, "Input
// drift statistics"). Per input: count, mean, variance and a histogram of its
// values -- numeric elements as numbers (BOOL as 0/1), BYTES elements by
// length -- against a reference profile, with the population stability index
//   PSI = sum over bins (cur - ref) * ln(cur / ref)
// of the bins' fractions, each at least kDriftPsiEpsilon.
//
// Bins: the reference fixes them. A recorded reference keeps a sample of
// its values (at most kDriftSampleSize per input) and cuts it at its
// quantiles into `drift_bins` bins of about equal frequency, the first
// open-ended, plus a last bin for values above the sample's maximum (edges
// that coincide are merged, so a constant input has three bins); a loaded
// profile carries its edges. The current histogram uses
// the reference's edges; before a reference exists, nothing is counted in
// the current window.
//
// Sampling: once the reference is fixed, a request is counted (every value
// of it) only when the sampler (DriftSampler, drift.sample_fraction) takes
// it, so PSI, mean and variance are unchanged in expectation and the cost
// per request is about the fraction's share of a full count. A request not
// taken costs a thread-local shard pick and one relaxed atomic add on that
// shard's counter, no lock. While a reference is being recorded every
// request is counted: recording is bounded (baseline_requests requests) and
// the reference is the half of the comparison every later request is
// measured against.
//
// Cost: Observe reads at most kDriftValuesPerInput elements of each input
// (evenly strided; the element type dispatched once per tensor) and adds
// them to one of kDriftShards accumulators, chosen per thread, under that
// shard's own mutex: no allocation, and a lock that another thread takes
// only when two threads share a shard or a reader merges the shards
// (Snapshot). Per value: a conversion, the sums, and the bin as a
// branch-free count of the edges below it (DriftBin).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/DriftConfig.h"
#include "core/InferenceRequest.h"
#include "core/Status.h"

namespace ortserve {

inline constexpr double kDriftPsiEpsilon = 1e-4;
inline constexpr size_t kDriftValuesPerInput = 256;
inline constexpr size_t kDriftSampleSize = 8192;
inline constexpr size_t kDriftShards = 8;

// Which of a counter's requests are counted: request n (counted from 0) when
// frac(n * (golden ratio - 1)) < fraction, in 64-bit fixed point. Of the
// first n requests, n * fraction within a few are taken (under 4 to 10^5,
// under 6 to 10^7), the first always, fraction 1 takes every one. Unlike
// every k-th request, traffic with a period (a client cycling through k
// inputs) cannot alias with it: each residue class is taken at the same rate.
class DriftSampler {
 public:
  explicit DriftSampler(double fraction);
  bool Take(uint64_t n) const { return all_ || n * kGoldenStep < threshold_; }

 private:
  static constexpr uint64_t kGoldenStep = 0x9e3779b97f4a7c15ULL;  // 2^64 * (golden ratio - 1)
  bool all_ = false;
  uint64_t threshold_ = 0;  // fraction * 2^64
};

// PSI of `current` against `reference` (bin counts, same length); 0 when
// either is empty.
double PopulationStabilityIndex(std::span<const uint64_t> reference, std::span<const uint64_t> current);

// Count, mean and variance, merged as Chan et al.
struct DriftMoments {
  uint64_t count = 0;
  double mean = 0;
  double m2 = 0;  // sum of squared deviations
  void Add(double x);
  void Merge(const DriftMoments& other);
  double Variance() const { return count > 0 ? m2 / static_cast<double>(count) : 0.0; }
};

// Index of the bin of `x` (not NaN) among edges (bin i holds edges[i-1] <= x < edges[i]).
size_t DriftBin(std::span<const double> edges, double x);

struct DriftInputProfile {
  std::string name;
  DriftMoments moments;
  std::vector<double> edges;       // strictly increasing
  std::vector<uint64_t> counts;    // edges.size() + 1
};

struct DriftProfile {
  std::vector<DriftInputProfile> inputs;
  const DriftInputProfile* Find(std::string_view name) const;
};

// The text GET .../drift?format=profile writes and drift_reference reads:
//   ortserve-drift-profile 1
//   input <name> <count> <mean> <m2> <edges...> | <counts...>
// (one line per input, numbers in shortest round-trip form).
std::string WriteDriftProfile(const DriftProfile& profile);
// kInvalidArgument naming the line for malformed text.
Result<DriftProfile> ParseDriftProfile(std::string_view text);

struct DriftInputSummary {
  std::string name;
  DriftMoments moments;           // since the reference was fixed
  std::vector<uint64_t> counts;   // over the reference's bins; empty without one
  std::optional<double> psi;      // with a reference
};

struct DriftSummary {
  bool recording = false;            // still recording its reference
  uint64_t baseline_requests = 0;    // 0: the reference was loaded
  uint64_t requests = 0;             // requests admitted (baseline ones up to baseline_requests)
  uint64_t observed_requests = 0;    // of them, those whose values were counted (all while recording)
  double sample_fraction = 1.0;      // drift.sample_fraction
  std::shared_ptr<const DriftProfile> reference;  // null while recording
  std::vector<DriftInputSummary> inputs;
  // The observed distribution as a profile: the current window where it
  // has values, else the reference. Null while recording.
  std::shared_ptr<const DriftProfile> AsProfile() const;
};

class InputDrift {
 public:
  // `reference` null: recorded from the first drift.baseline_requests requests.
  InputDrift(const inference::ModelConfig& config, const DriftConfig& drift,
             std::shared_ptr<const DriftProfile> reference);
  ~InputDrift();

  // Hot path: counts the inputs of an admitted request when it is sampled
  // (matched by name; inputs the config does not list are ignored).
  void Observe(const InferenceRequest& request);
  DriftSummary Snapshot() const;

 private:
  struct Shard;
  void FreezeBaseline();
  // The config's index of input `name`, sent at `position` of the request;
  // names_.size() when the config does not list it.
  size_t InputIndex(const std::string& name, size_t position) const;

  std::vector<std::string> names_;  // the config's inputs
  const uint64_t baseline_requests_;
  const int bins_;
  const double sample_fraction_;
  const DriftSampler sampler_;
  std::atomic<uint64_t> requests_{0};
  std::unique_ptr<Shard[]> shards_;
  mutable std::mutex freeze_mutex_;
  std::shared_ptr<const DriftProfile> reference_holder_;  // set once (under freeze_mutex_)
  std::atomic<const DriftProfile*> reference_{nullptr};    // reference_holder_.get() once set
  std::vector<const DriftInputProfile*> reference_inputs_;  // per input; null: not in the profile
};

}  // namespace ortserve
