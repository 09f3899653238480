// Fuzz target: the version_weights parameter ("1:90,2:10") parser and the
// smooth weighted round-robin picker built from it (repository/VersionWeights).
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "FuzzCommon.h"
#include "serving/WeightedVersionPicker.h"

using namespace ortserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseVersionWeights(text);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(!parsed->empty());
  std::set<int64_t> versions;
  int64_t total = 0;
  for (const VersionWeight& w : *parsed) {
    FUZZ_CHECK(w.version > 0);
    FUZZ_CHECK(w.weight >= 0 && w.weight <= 1000000);
    FUZZ_CHECK(versions.insert(w.version).second);
    total += w.weight;
  }
  FUZZ_CHECK(total > 0);

  // Over one full cycle of sum(weights) picks, each version is picked exactly
  // `weight` times (bounded so a fuzz iteration stays fast).
  if (total <= 4096) {
    WeightedVersionPicker picker(*parsed);
    std::map<int64_t, int64_t> picks;
    for (int64_t i = 0; i < total; ++i) {
      auto v = picker.Pick([](int64_t) { return true; });
      FUZZ_CHECK(v.has_value());
      ++picks[*v];
    }
    for (const VersionWeight& w : *parsed) FUZZ_CHECK(picks[w.version] == w.weight);
    // Nothing eligible: no pick.
    FUZZ_CHECK(!picker.Pick([](int64_t) { return false; }).has_value());
  }
  return 0;
}
