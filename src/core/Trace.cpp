#include "core/Trace.h"

#include <algorithm>
#include <random>

#include "core/Hex.h"

namespace ortserve {
namespace {

int LowerHexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is invalid in traceparent
}

// Decodes exactly 2*N lowercase hex characters.
template <size_t N>
bool DecodeHex(std::string_view hex, std::array<uint8_t, N>* out) {
  if (hex.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = LowerHexValue(hex[2 * i]), lo = LowerHexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <typename T, size_t N>
bool AnyNonZero(const std::array<T, N>& values) {
  return std::any_of(values.begin(), values.end(), [](T v) { return v != 0; });
}

// xoshiro256** (Blackman & Vigna): fast, 256-bit state, good enough for ids
// and sampling (ids need uniqueness, not secrecy).
class IdGenerator {
 public:
  IdGenerator() {
    std::random_device device;
    for (uint64_t& word : state_) word = (uint64_t{device()} << 32) ^ device();
    if (!AnyNonZero(state_)) state_[0] = 1;  // all zero is the one seed that never leaves zero
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  template <size_t N>
  void Fill(std::array<uint8_t, N>* bytes) {
    do {
      for (size_t i = 0; i < N; i += 8) {
        uint64_t word = Next();
        for (size_t j = i; j < std::min(N, i + 8); ++j, word >>= 8) (*bytes)[j] = static_cast<uint8_t>(word);
      }
    } while (!AnyNonZero(*bytes));
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> state_;
};

IdGenerator& ThreadGenerator() {
  thread_local IdGenerator generator;
  return generator;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool TraceId::valid() const { return AnyNonZero(bytes); }
std::string TraceId::Hex() const { return ToHex(bytes); }
bool SpanId::valid() const { return AnyNonZero(bytes); }
std::string SpanId::Hex() const { return ToHex(bytes); }

std::optional<TraceParent> ParseTraceparent(std::string_view header) {
  // version "-" trace-id "-" parent-id "-" trace-flags
  //    2    1     32    1     16     1     2        = 55
  constexpr size_t kLength = 55;
  header = TrimOws(header);
  if (header.size() < kLength) return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  if (!DecodeHex(header.substr(0, 2), &version) || version[0] == 0xff) return std::nullopt;
  // Version 00 is exactly 55 characters; a later version may append fields
  // after a '-', which we ignore (the spec's forward-compatibility rule).
  if (version[0] == 0 ? header.size() != kLength : header.size() > kLength && header[kLength] != '-') {
    return std::nullopt;
  }
  if (header[2] != '-' || header[35] != '-' || header[52] != '-') return std::nullopt;
  TraceParent parsed;
  if (!DecodeHex(header.substr(3, 32), &parsed.trace_id.bytes) ||
      !DecodeHex(header.substr(36, 16), &parsed.parent_id.bytes) || !DecodeHex(header.substr(53, 2), &flags)) {
    return std::nullopt;
  }
  if (!parsed.trace_id.valid() || !parsed.parent_id.valid()) return std::nullopt;
  parsed.sampled = (flags[0] & 0x01) != 0;
  return parsed;
}

std::string FormatTraceparent(const TraceParent& context) {
  return "00-" + context.trace_id.Hex() + "-" + context.parent_id.Hex() + (context.sampled ? "-01" : "-00");
}

void AddTraceparentValue(std::optional<std::string>* collected, std::string_view value) {
  if (collected->has_value()) {
    collected->value() += ',';
    collected->value() += value;
  } else {
    collected->emplace(value);
  }
}

TraceId RandomTraceId() {
  TraceId id;
  ThreadGenerator().Fill(&id.bytes);
  return id;
}

SpanId RandomSpanId() {
  SpanId id;
  ThreadGenerator().Fill(&id.bytes);
  return id;
}

}  // namespace ortserve
