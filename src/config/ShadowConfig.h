#pragma once
// Shadow comparison, as the config states it (docs/model-config.md, "Shadow
// comparison"):
//   parameters { key: "shadow_version"   value { string_value: "2" } }
//   parameters { key: "shadow_fraction"  value { string_value: "0.1" } }
//   parameters { key: "shadow_tolerance" value { string_value: "0.01" } }   (optional, default 0)
// The runs and the comparison are serving/ShadowComparison.h.
#include <cstdint>
#include <optional>
#include <string>

#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

inline constexpr const char* kShadowVersionParameter = "shadow_version";
inline constexpr const char* kShadowFractionParameter = "shadow_fraction";
inline constexpr const char* kShadowToleranceParameter = "shadow_tolerance";

// True for the three keys above.
bool IsShadowParameter(const std::string& key);

struct ShadowConfig {
  int64_t version = 0;     // >= 1: the version the sampled requests also run on
  double fraction = 1.0;   // (0, 1]: share of the serving versions' requests shadowed
  // An element of a floating-point output mismatches when
  // |shadow - served| > tolerance * max(1, |served|) (runtime/NumericalComparison.h).
  double tolerance = 0.0;  // >= 0

  // nullopt when the config sets no shadow_* key. kInvalidArgument naming
  // the parameter for a malformed or out-of-range value, and for
  // shadow_fraction / shadow_tolerance without shadow_version or
  // shadow_version without shadow_fraction.
  static Result<std::optional<ShadowConfig>> FromConfig(const inference::ModelConfig& config);
};

}  // namespace ortserve
