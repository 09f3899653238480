// JsonWriter::AppendQuoted: the one JSON string escaper (error bodies, the
// access log, OTLP spans) writes valid JSON whatever bytes it is given.
#include <gtest/gtest.h>

#include <string>

#include "core/Utf8.h"
#include "server/json/JsonWriter.h"

namespace ortserve {
namespace {

std::string Quoted(std::string_view s) {
  std::string out;
  JsonWriter::AppendQuoted(&out, s);
  return out;
}

TEST(JsonWriter, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(Quoted("a\"b\\c\nd\te\x01"), R"("a\"b\\c\nd\te\u0001")");
}

TEST(JsonWriter, KeepsWellFormedUtf8) {
  EXPECT_EQ(Quoted("ünïcödé \xe4\xb8\xad \xf0\x9f\x98\x80"), "\"ünïcödé \xe4\xb8\xad \xf0\x9f\x98\x80\"");
}

TEST(JsonWriter, ReplacesBytesThatAreNoUtf8) {
  // A model name from the path /v2/models/%c0%ae%ff/infer, then a truncated
  // sequence at the end of a message cut to length.
  const std::string quoted = Quoted("model '\xc0\xae\xff' x\xe4\xb8");
  EXPECT_EQ(quoted, R"("model '\ufffd\ufffd\ufffd' x\ufffd\ufffd")");
  EXPECT_TRUE(IsValidUtf8(quoted));
}

}  // namespace
}  // namespace ortserve
