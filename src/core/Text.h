#pragma once
// Small text helpers for messages, logs and parameter values.
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
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

// `s` without its leading and trailing spaces and tabs.
inline std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The number `s` spells, blanks around it allowed; nullopt for anything else
// (empty, trailing characters, out of range, and for floating point infinity
// or NaN).
template <typename T>
std::optional<T> ParseNumber(std::string_view s) {
  s = TrimBlanks(s);
  T v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) return std::nullopt;
  }
  return v;
}

}  // namespace ortserve
