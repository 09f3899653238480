#pragma once
// Lowercase hex, two digits a byte: digests, trace and span ids, log fields.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ortserve {

inline constexpr char kLowerHexDigits[] = "0123456789abcdef";

// Appends the lowercase hex of the `size` bytes at `data`.
inline void AppendHex(const void* data, size_t size, std::string* out) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) {
    out->push_back(kLowerHexDigits[bytes[i] >> 4]);
    out->push_back(kLowerHexDigits[bytes[i] & 15]);
  }
}

// Lowercase hex of `bytes`.
inline std::string ToHex(std::string_view bytes) {
  std::string hex;
  hex.reserve(2 * bytes.size());
  AppendHex(bytes.data(), bytes.size(), &hex);
  return hex;
}
template <size_t N>
std::string ToHex(const std::array<uint8_t, N>& bytes) {
  std::string hex;
  hex.reserve(2 * N);
  AppendHex(bytes.data(), N, &hex);
  return hex;
}

}  // namespace ortserve
