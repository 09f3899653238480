#include "config/VersionPolicy.h"

#include <algorithm>

namespace ortserve {

VersionSelection SelectVersions(const inference::ModelVersionPolicy& policy,
                                std::vector<int64_t> available) {
  std::sort(available.begin(), available.end());
  available.erase(std::unique(available.begin(), available.end()), available.end());
  VersionSelection out;
  switch (policy.policy_choice_case()) {
    case inference::ModelVersionPolicy::kAll:
      out.load = available;
      break;
    case inference::ModelVersionPolicy::kSpecific: {
      std::vector<int64_t> wanted(policy.specific().versions().begin(),
                                  policy.specific().versions().end());
      std::sort(wanted.begin(), wanted.end());
      wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
      for (int64_t v : wanted) {
        if (std::binary_search(available.begin(), available.end(), v)) {
          out.load.push_back(v);
        } else {
          out.missing.push_back(v);
        }
      }
      break;
    }
    case inference::ModelVersionPolicy::kLatest:
    case inference::ModelVersionPolicy::POLICY_CHOICE_NOT_SET: {
      size_t n = 1;
      if (policy.has_latest() && policy.latest().num_versions() > 0) {
        n = policy.latest().num_versions();
      }
      n = std::min(n, available.size());
      out.load.assign(available.end() - static_cast<std::ptrdiff_t>(n), available.end());
      break;
    }
  }
  return out;
}

}  // namespace ortserve
