#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "server/json/ShortestNumber.h"

namespace ortserve {
namespace {

template <typename T>
std::string Shortest(T v) {
  char buf[kShortestNumberMaxChars];
  return std::string(buf, WriteShortest(v, buf));
}

// Significant digits of a decimal text ("0.00120" -> 2, "1.5e-7" -> 2).
int SignificantDigits(const std::string& text) {
  std::string digits;
  for (char c : text) {
    if (c == 'e') break;
    if (c >= '0' && c <= '9') digits += c;
  }
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return 1;
  const size_t last = digits.find_last_not_of('0');
  return static_cast<int>(last - first + 1);
}

// Reads back as the same bits, with no more significant digits than
// std::to_chars's shortest form, which the writer replaces (to_chars prints
// integers below 1e21 exactly, "8398454272" where the writer has
// "8398454300": fewer digits, the same float).
template <typename T>
void ExpectShortestRoundTrip(T v) {
  const std::string text = Shortest(v);
  ASSERT_LE(text.size(), static_cast<size_t>(kShortestNumberMaxChars));
  T back{};
  const auto r = std::from_chars(text.data(), text.data() + text.size(), back);
  ASSERT_TRUE(r.ec == std::errc() && r.ptr == text.data() + text.size()) << text;
  ASSERT_EQ(std::memcmp(&back, &v, sizeof(T)), 0) << text;
  char ref[64];
  const auto ref_end = std::to_chars(ref, ref + sizeof ref, v).ptr;
  ASSERT_LE(SignificantDigits(text), SignificantDigits(std::string(ref, ref_end))) << text;
}

TEST(ShortestNumber, Layout) {
  EXPECT_EQ(Shortest(0.0f), "0");
  EXPECT_EQ(Shortest(-0.0f), "-0");
  EXPECT_EQ(Shortest(1.0f), "1");
  EXPECT_EQ(Shortest(-2.5f), "-2.5");
  EXPECT_EQ(Shortest(100.0f), "100");
  EXPECT_EQ(Shortest(0.1f), "0.1");
  EXPECT_EQ(Shortest(0.001f), "0.001");
  EXPECT_EQ(Shortest(1e-6f), "0.000001");
  EXPECT_EQ(Shortest(1.5e-7f), "1.5e-7");
  EXPECT_EQ(Shortest(123456789.0f), "123456790");  // the float nearest; shortest digits, then zeros
  EXPECT_EQ(Shortest(1e21f), "1e+21");
  EXPECT_EQ(Shortest(std::numeric_limits<float>::max()), "3.4028235e+38");
  EXPECT_EQ(Shortest(std::numeric_limits<float>::denorm_min()), "1e-45");
  EXPECT_EQ(Shortest(0.1), "0.1");
  EXPECT_EQ(Shortest(1e20), "100000000000000000000");
  EXPECT_EQ(Shortest(1e21), "1e+21");
  EXPECT_EQ(Shortest(-1e-7), "-1e-7");
  EXPECT_EQ(Shortest(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
  EXPECT_EQ(Shortest(std::numeric_limits<double>::denorm_min()), "5e-324");
}

TEST(ShortestNumber, RandomBitPatternsRoundTripWithTheFewestDigits) {
  std::mt19937_64 rng(20261201);
  for (int i = 0; i < 300000; ++i) {
    const auto bits = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &bits, sizeof f);
    if (std::isfinite(f)) ExpectShortestRoundTrip(f);
  }
  for (int i = 0; i < 100000; ++i) {
    const uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (std::isfinite(d)) ExpectShortestRoundTrip(d);
  }
}

TEST(ShortestNumber, EveryLayoutBoundary) {
  // Powers of ten and their neighbours cross each switch between layouts.
  for (int e = -45; e <= 38; ++e) {
    const float p = std::pow(10.0f, static_cast<float>(e));
    if (!std::isfinite(p) || p == 0) continue;
    ExpectShortestRoundTrip(p);
    ExpectShortestRoundTrip(std::nextafter(p, 0.0f));
    ExpectShortestRoundTrip(std::nextafter(p, std::numeric_limits<float>::infinity()));
  }
  for (int e = -323; e <= 308; ++e) {
    const double p = std::pow(10.0, e);
    if (!std::isfinite(p) || p == 0) continue;
    ExpectShortestRoundTrip(p);
    ExpectShortestRoundTrip(-std::nextafter(p, 0.0));
  }
}

}  // namespace
}  // namespace ortserve
