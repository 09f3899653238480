// Utf8: well-formedness as RFC 3629 defines it, and the repair that the JSON
// writer and the server log share.
#include <gtest/gtest.h>

#include <string>

#include "core/Utf8.h"

namespace ortserve {
namespace {

TEST(Utf8, WellFormedTextIsValid) {
  for (const char* s : {"", "plain ascii", "ünïcödé", "\xe4\xb8\xad\xe6\x96\x87", "\xf0\x9f\x98\x80",
                        "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
    std::string repaired;
    AppendValidUtf8(&repaired, s);
    EXPECT_EQ(repaired, s);
  }
}

TEST(Utf8, IllFormedSequencesAreRefused) {
  // Overlong '.', stray continuation, truncated, surrogate, above U+10FFFF,
  // overlong 3- and 4-byte forms, bytes that never occur.
  for (const char* s : {"\xc0\xae", "\x80", "\xe4\xb8", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe0\x80\xaf",
                        "\xf0\x80\x80\xaf", "\xff", "\xfe", "a\xc3"}) {
    EXPECT_FALSE(IsValidUtf8(s)) << s;
  }
}

TEST(Utf8, RepairReplacesEachBadByteAndKeepsTheRest) {
  std::string out = "x";
  AppendValidUtf8(&out, "a\xc0\xae\xc3\xa9z\xe4\xb8");
  EXPECT_EQ(out, "xa\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9z\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_TRUE(IsValidUtf8(out));
}

}  // namespace
}  // namespace ortserve
