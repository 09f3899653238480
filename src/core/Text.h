#pragma once
// Small text helpers for messages and logs.
#include <string>
#include <string_view>
#include <vector>

namespace ortserve {

// "a, b, c" (with `separator` between the items); "" for none.
inline std::string Join(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace ortserve
