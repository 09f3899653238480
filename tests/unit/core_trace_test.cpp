// W3C traceparent parsing and formatting (the edge cases of Trace Context
// level 1 and the W3C test suite's), and the random ids.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/Trace.h"

namespace ortserve {
namespace {

constexpr const char* kTraceId = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr const char* kParentId = "00f067aa0ba902b7";

std::string Header(std::string_view version, std::string_view trace, std::string_view parent,
                   std::string_view flags) {
  return std::string(version) + "-" + std::string(trace) + "-" + std::string(parent) + "-" + std::string(flags);
}

TEST(Traceparent, ParsesTheSpecExample) {
  const auto parsed = ParseTraceparent(Header("00", kTraceId, kParentId, "01"));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->trace_id.Hex(), kTraceId);
  EXPECT_EQ(parsed->parent_id.Hex(), kParentId);
  EXPECT_TRUE(parsed->sampled);
  EXPECT_EQ(parsed->trace_id.bytes[0], 0x4b);
  EXPECT_EQ(parsed->parent_id.bytes[7], 0xb7);
}

TEST(Traceparent, SampledIsBitZeroOfTheFlags) {
  EXPECT_FALSE(ParseTraceparent(Header("00", kTraceId, kParentId, "00"))->sampled);
  EXPECT_FALSE(ParseTraceparent(Header("00", kTraceId, kParentId, "02"))->sampled);
  EXPECT_TRUE(ParseTraceparent(Header("00", kTraceId, kParentId, "03"))->sampled);
  EXPECT_TRUE(ParseTraceparent(Header("00", kTraceId, kParentId, "ff"))->sampled);
}

TEST(Traceparent, FormatRoundTrips) {
  const std::string header = Header("00", kTraceId, kParentId, "01");
  EXPECT_EQ(FormatTraceparent(*ParseTraceparent(header)), header);
  TraceParent unsampled = *ParseTraceparent(header);
  unsampled.sampled = false;
  EXPECT_EQ(FormatTraceparent(unsampled), Header("00", kTraceId, kParentId, "00"));
}

TEST(Traceparent, RejectsWhatTheSpecCallsInvalid) {
  const std::string zeros32(32, '0'), zeros16(16, '0');
  for (const std::string& bad : {
           std::string(),
           std::string("00"),
           Header("00", kTraceId, kParentId, "0"),                  // 54 characters
           Header("00", kTraceId, kParentId, "01") + "-",           // version 00 is exactly 55
           Header("00", kTraceId, kParentId, "01") + "-extra",      // ... even with a separator
           Header("00", zeros32, kParentId, "01"),                  // all-zero trace id
           Header("00", kTraceId, zeros16, "01"),                   // all-zero parent id
           Header("ff", kTraceId, kParentId, "01"),                 // forbidden version
           Header("00", "4BF92F3577B34DA6A3CE929D0E0E4736", kParentId, "01"),  // uppercase
           Header("00", kTraceId, "00F067AA0BA902B7", "01"),
           Header("0g", kTraceId, kParentId, "01"),                 // not hex
           Header("00", kTraceId, kParentId, "0x"),
           Header("00", "4bf92f3577b34da6a3ce929d0e0e473", kParentId + std::string("7"), "01"),  // shifted dash
           "00_" + std::string(kTraceId) + "-" + kParentId + "-01",  // wrong separator
           std::string(kTraceId) + "-" + kParentId + "-01-00",       // fields in the wrong place
           // Two headers joined as HTTP joins repeated fields.
           Header("00", kTraceId, kParentId, "01") + "," + Header("00", kTraceId, kParentId, "01"),
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(Traceparent, HigherVersionsParseTheirFirstFourFields) {
  const auto plain = ParseTraceparent(Header("01", kTraceId, kParentId, "01"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->trace_id.Hex(), kTraceId);
  const auto extended = ParseTraceparent(Header("cc", kTraceId, kParentId, "01") + "-what-the-future-brings");
  ASSERT_TRUE(extended.has_value());
  EXPECT_TRUE(extended->sampled);
  // After the flags, a later version must continue with '-'.
  EXPECT_FALSE(ParseTraceparent(Header("cc", kTraceId, kParentId, "01") + "x").has_value());
  EXPECT_FALSE(ParseTraceparent(Header("cc", kTraceId, kParentId, "01") + ",").has_value());
}

TEST(Traceparent, IgnoresSurroundingWhitespace) {
  EXPECT_TRUE(ParseTraceparent(" \t" + Header("00", kTraceId, kParentId, "01") + "\t ").has_value());
}

TEST(Traceparent, RepeatedValuesAreJoinedAndThereforeInvalid) {
  std::optional<std::string> collected;
  const std::string header = Header("00", kTraceId, kParentId, "01");
  AddTraceparentValue(&collected, header);
  ASSERT_TRUE(collected.has_value());
  EXPECT_TRUE(ParseTraceparent(*collected).has_value());
  AddTraceparentValue(&collected, header);
  EXPECT_EQ(*collected, header + "," + header);
  EXPECT_FALSE(ParseTraceparent(*collected).has_value());
}

TEST(TraceIds, RandomIdsAreValidAndDistinct) {
  std::set<std::string> traces, spans;
  for (int i = 0; i < 1000; ++i) {
    const TraceId trace = RandomTraceId();
    const SpanId span = RandomSpanId();
    EXPECT_TRUE(trace.valid());
    EXPECT_TRUE(span.valid());
    EXPECT_EQ(trace.Hex().size(), 32u);
    EXPECT_EQ(span.Hex().size(), 16u);
    traces.insert(trace.Hex());
    spans.insert(span.Hex());
  }
  EXPECT_EQ(traces.size(), 1000u);
  EXPECT_EQ(spans.size(), 1000u);
  EXPECT_FALSE(TraceId{}.valid());
  EXPECT_FALSE(SpanId{}.valid());
}

}  // namespace
}  // namespace ortserve
