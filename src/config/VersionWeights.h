#pragma once
// Canary traffic split, as the config states it: the model config parameter
//   parameters { key: "version_weights" value { string_value: "1:90,2:10" } }
// spreads requests that name no version over the listed versions in
// proportion to their weights (docs/model-config.md); the picking itself is
// serving/WeightedVersionPicker.h.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/Status.h"

namespace ortserve {

inline constexpr const char* kVersionWeightsParameter = "version_weights";

struct VersionWeight {
  int64_t version = 0;  // > 0
  int64_t weight = 0;   // >= 0; 0 takes the version out of the split
};

// "1:90,2:10" (spaces allowed around items) -> {{1,90},{2,10}}. kInvalidArgument
// names the bad item; a version listed twice or no positive weight is an error.
Result<std::vector<VersionWeight>> ParseVersionWeights(const std::string& text);

}  // namespace ortserve
