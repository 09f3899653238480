#pragma once
// Input drift statistics, as the config states them (docs/model-config.md,
// "Input drift statistics"):
//   parameters { key: "drift_baseline_requests" value { string_value: "1000" } }
//   parameters { key: "drift_bins"              value { string_value: "10" } }      (optional)
//   parameters { key: "drift_sample_fraction"   value { string_value: "0.1" } }     (optional)
// or, with a profile another deployment wrote (GET /v2/models/<m>/drift?format=profile):
//   parameters { key: "drift_reference"         value { string_value: "drift_profile.txt" } }
// The statistics themselves are serving/InputDrift.h.
#include <cstdint>
#include <optional>
#include <string>

#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

inline constexpr const char* kDriftBaselineRequestsParameter = "drift_baseline_requests";
inline constexpr const char* kDriftReferenceParameter = "drift_reference";
inline constexpr const char* kDriftBinsParameter = "drift_bins";
inline constexpr const char* kDriftSampleFractionParameter = "drift_sample_fraction";

inline constexpr int kDriftDefaultBins = 10;
inline constexpr int kDriftMaxBins = 100;
// Once the reference is fixed, the share of requests whose values are
// counted: the per-request cost is about this fraction of a full count's
// (docs/decisions.md, "Drift statistics sampled once the reference is fixed").
inline constexpr double kDriftDefaultSampleFraction = 0.1;

// True for the four keys above.
bool IsDriftParameter(const std::string& key);

struct DriftConfig {
  // Exactly one of the two is set: the reference is recorded from the first
  // `baseline_requests` requests each version admits, or read from
  // `reference_path` (relative to the model folder).
  uint64_t baseline_requests = 0;
  std::string reference_path;
  int bins = kDriftDefaultBins;  // recorded references only: 2..kDriftMaxBins
  // Above 0, at most 1: once the reference is fixed, about this share of the
  // requests is counted, every value of each (a recorded reference counts
  // all of its baseline_requests).
  double sample_fraction = kDriftDefaultSampleFraction;

  // The drift statistics `config` asks for; nullopt when it sets no drift_*
  // key. kInvalidArgument naming the parameter for a malformed or
  // out-of-range value, for both or neither of drift_baseline_requests and
  // drift_reference (drift_bins or drift_sample_fraction alone), for
  // drift_bins with drift_reference (the profile fixes the bins), and for a
  // drift_reference path that leaves the model folder.
  static Result<std::optional<DriftConfig>> FromConfig(const inference::ModelConfig& config);
};

}  // namespace ortserve
