#include "config/VersionWeights.h"

#include <charconv>
#include <set>
#include <string_view>

namespace ortserve {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> ParseNumber(std::string_view s) {
  s = Trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

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
    const std::string_view item = Trim(rest.substr(0, comma));
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) return bad("item '" + std::string(item) + "' has no ':'");
    auto version = ParseNumber(item.substr(0, colon));
    auto weight = ParseNumber(item.substr(colon + 1));
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
