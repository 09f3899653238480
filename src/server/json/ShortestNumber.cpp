#include "server/json/ShortestNumber.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ortserve {
namespace {

constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

int CountDigits(uint64_t n) {
  static constexpr uint64_t kPowers[] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL,
                                         10000000ULL, 100000000ULL, 1000000000ULL, 10000000000ULL,
                                         100000000000ULL, 1000000000000ULL, 10000000000000ULL,
                                         100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
                                         100000000000000000ULL, 1000000000000000000ULL,
                                         10000000000000000000ULL};
  // log10(2) ~ 1233 / 4096: t is the digit count or one more.
  const int t = std::bit_width(n | 1) * 1233 >> 12;
  return t + (n >= kPowers[t]);
}

// Writes n's decimal digits so that they end just before `end`.
void WriteDigitsBefore(uint64_t n, char* end) {
  while (n >= 100) {
    end -= 2;
    std::memcpy(end, kDigitPairs + (n % 100) * 2, 2);
    n /= 100;
  }
  if (n >= 10) {
    std::memcpy(end - 2, kDigitPairs + n * 2, 2);
  } else {
    end[-1] = static_cast<char>('0' + n);
  }
}

// significand x 10^exponent, significand > 0 without trailing zeros
// (Dragonbox's output), laid out as the header says. The digits are written
// in place and then moved apart for the point: no temporary buffer.
char* Layout(uint64_t significand, int exponent, char* out) {
  const int n = CountDigits(significand);
  // The value is 0.d1d2...dn x 10^point.
  const int point = n + exponent;
  if (point > 0 && point <= 21) {
    WriteDigitsBefore(significand, out + n);
    if (n <= point) {  // an integer: the digits, then zeros
      for (int i = n; i < point; ++i) out[i] = '0';
      return out + point;
    }
    for (int i = n; i > point; --i) out[i] = out[i - 1];
    out[point] = '.';
    return out + n + 1;
  }
  if (point <= 0 && point > -6) {  // 0.000ddd
    const int zeros = -point;
    out[0] = '0';
    out[1] = '.';
    for (int i = 0; i < zeros; ++i) out[2 + i] = '0';
    WriteDigitsBefore(significand, out + 2 + zeros + n);
    return out + 2 + zeros + n;
  }
  WriteDigitsBefore(significand, out + 1 + n);  // d.ddd: the first digit moves left of the point
  out[0] = out[1];
  char* p = out + 1;
  if (n > 1) {
    *p = '.';
    p += n;
  }
  int e = point - 1;
  *p++ = 'e';
  *p++ = e < 0 ? '-' : '+';
  if (e < 0) e = -e;
  const int e_digits = CountDigits(static_cast<uint64_t>(e));
  WriteDigitsBefore(static_cast<uint64_t>(e), p + e_digits);
  return p + e_digits;
}

template <typename T>
char* Write(T value, char* out) {
  if (std::signbit(value)) {
    *out++ = '-';
    value = -value;
  }
  if (value == 0) {
    *out = '0';
    return out + 1;
  }
  const auto decimal = fmt::detail::dragonbox::to_decimal(value);
  return Layout(decimal.significand, decimal.exponent, out);
}

}  // namespace

char* WriteShortest(float value, char* out) { return Write(value, out); }
char* WriteShortest(double value, char* out) { return Write(value, out); }

}  // namespace ortserve
