#include "config/VersionWeights.h"

#include <set>
#include <string_view>

#include "core/Text.h"

namespace ortserve {
namespace {



}  // namespace

Result<std::vector<VersionWeight>> ParseVersionWeights(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("parameter '" + std::string(kVersionWeightsParameter) + "' value '" + text +
                           "': " + why + " (expected \"<version>:<weight>,...\", e.g. \"1:90,2:10\")");
  };
  std::vector<VersionWeight> out;
  std::set<int64_t> seen;
  std::string_view rest = text;
  int64_t total = 0;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = TrimBlanks(rest.substr(0, comma));
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) return bad("item '" + std::string(item) + "' has no ':'");
    auto version = ParseNumber<int64_t>(item.substr(0, colon));
    auto weight = ParseNumber<int64_t>(item.substr(colon + 1));
    if (!version || *version <= 0) return bad("'" + std::string(item) + "' needs a positive version");
    if (!weight || *weight < 0 || *weight > 1000000) {
      return bad("'" + std::string(item) + "' needs a weight from 0 to 1000000");
    }
    if (!seen.insert(*version).second) return bad("version " + std::to_string(*version) + " is listed twice");
    out.push_back({*version, *weight});
    total += *weight;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (total <= 0) return bad("no version has a positive weight");
  return out;
}

}  // namespace ortserve
