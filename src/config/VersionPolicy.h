#pragma once
// Which version directories of a model to load, per the config's
// version_policy (Triton semantics; default: latest { num_versions: 1 }).
#include <cstdint>
#include <vector>

#include "model_config.pb.h"

namespace ortserve {

struct VersionSelection {
  std::vector<int64_t> load;     // ascending
  std::vector<int64_t> missing;  // `specific` versions with no directory, ascending
};

// `available`: the positive version numbers found on disk (any order).
VersionSelection SelectVersions(const inference::ModelVersionPolicy& policy,
                                std::vector<int64_t> available);

}  // namespace ortserve
