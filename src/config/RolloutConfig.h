#pragma once
// Progressive canary, as the config states it (docs/model-config.md,
// "Progressive rollout"):
//   parameters { key: "rollout_steps"          value { string_value: "5,20,50,100" } }
//   parameters { key: "rollout_step_seconds"   value { string_value: "300,600,600" } }
//   parameters { key: "rollout_min_requests"   value { string_value: "200" } }
//   parameters { key: "rollout_max_p95_ms"     value { string_value: "900" } }
//   parameters { key: "rollout_max_error_rate" value { string_value: "0.03" } }
//   parameters { key: "rollout_max_p95_ratio"  value { string_value: "1.5" } }   (optional)
// The controller that acts on it is serving/RolloutController.h.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

inline constexpr const char* kRolloutStepsParameter = "rollout_steps";
inline constexpr const char* kRolloutStepSecondsParameter = "rollout_step_seconds";
inline constexpr const char* kRolloutMinRequestsParameter = "rollout_min_requests";
inline constexpr const char* kRolloutMaxP95MsParameter = "rollout_max_p95_ms";
inline constexpr const char* kRolloutMaxErrorRateParameter = "rollout_max_error_rate";
inline constexpr const char* kRolloutMaxP95RatioParameter = "rollout_max_p95_ratio";

// True for the six keys above.
bool IsRolloutParameter(const std::string& key);

struct RolloutConfig {
  // Percent of unversioned traffic the candidate takes in each analysed step:
  // strictly increasing, each in 1..99. The 100 that ends the list (written
  // or implied) is the promotion, which is not a timed step.
  std::vector<int> steps;
  std::vector<double> step_seconds;  // one per entry of `steps`, each > 0
  uint64_t min_requests = 1;         // candidate requests a step needs before it may pass (>= 1)
  std::optional<double> max_p95_ms;      // > 0
  std::optional<double> max_error_rate;  // 0..1
  std::optional<double> max_p95_ratio;   // > 0: candidate p95 / stable p95

  // The rollout `config` asks for; nullopt when it sets no rollout_* key.
  // kInvalidArgument naming the parameter for a malformed or out-of-range
  // value, for rollout_step_seconds whose count is neither 1 nor one per
  // analysed step, and for a rollout without rollout_steps,
  // rollout_step_seconds or any threshold (rollout_max_p95_ms,
  // rollout_max_error_rate, rollout_max_p95_ratio).
  static Result<std::optional<RolloutConfig>> FromConfig(const inference::ModelConfig& config);
  // The same from the parameters alone (key -> string value).
  static Result<std::optional<RolloutConfig>> FromParameters(
      const google::protobuf::Map<std::string, inference::ModelParameter>& parameters);
};

}  // namespace ortserve
