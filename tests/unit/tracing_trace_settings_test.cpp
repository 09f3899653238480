// TraceSettings: Triton's trace settings (rate, count, level, per model with
// fallback to the global setting) and their parsing, shared by both front ends.
#include <gtest/gtest.h>

#include <optional>
#include <string_view>
#include <vector>

#include "server/tracing/TraceSettings.h"

namespace ortserve::tracing {
namespace {

using Values = std::optional<std::vector<std::string_view>>;

TraceSettingsChange Change(std::string_view key, Values values) {
  TraceSettingsChange change;
  EXPECT_TRUE(AddTraceSettingChange(key, values, &change).ok()) << key;
  return change;
}

Status ParseError(std::string_view key, Values values) {
  TraceSettingsChange change;
  return AddTraceSettingChange(key, values, &change);
}

const TraceSettingValues kOn{.level = kTraceLevelTimestamps, .rate = 1, .count = -1};

int SampledOf(TraceSettings& settings, std::string_view model, int requests) {
  int sampled = 0;
  for (int i = 0; i < requests; ++i) sampled += settings.SamplerFor(model)->SampleNew() ? 1 : 0;
  return sampled;
}

TEST(TraceSettings, RateTracesOneOfEveryNAndCountStopsIt) {
  TraceSettings settings(kOn, /*exporting=*/true);
  ASSERT_TRUE(settings.Update("", Change("trace_rate", Values({"4"}))).ok());
  EXPECT_EQ(SampledOf(settings, "m", 12), 3);
  ASSERT_TRUE(settings.Update("", Change("trace_count", Values({"2"}))).ok());
  EXPECT_EQ(SampledOf(settings, "m", 40), 2);
  EXPECT_EQ(settings.Get("").count, 0);
  // A change of another field keeps the count where it was.
  ASSERT_TRUE(settings.Update("", Change("trace_count", Values({"3"}))).ok());
  EXPECT_EQ(SampledOf(settings, "m", 4), 1);
  ASSERT_TRUE(settings.Update("", Change("trace_rate", Values({"1"}))).ok());
  EXPECT_EQ(settings.Get("").count, 2);
  ASSERT_TRUE(settings.Update("", Change("trace_rate", Values({"0"}))).ok());
  EXPECT_EQ(SampledOf(settings, "m", 10), 0);  // 0: only traceparents start traces
}

TEST(TraceSettings, AModelSettingOverridesAndClearingFallsBack) {
  TraceSettings settings(kOn, true);
  ASSERT_TRUE(settings.Update("m", Change("trace_level", Values({"OFF"}))).ok());
  EXPECT_FALSE(settings.SamplerFor("m")->enabled());
  EXPECT_TRUE(settings.SamplerFor("other")->enabled());
  // The model's other fields follow the global ones, also when they change.
  ASSERT_TRUE(settings.Update("", Change("trace_rate", Values({"9"}))).ok());
  EXPECT_EQ(settings.Get("m").rate, 9u);
  auto cleared = settings.Update("m", Change("trace_level", std::nullopt));
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->level, kTraceLevelTimestamps);
  EXPECT_TRUE(settings.SamplerFor("m")->enabled());
  // Clearing the global rate returns it to the startup value.
  EXPECT_EQ(settings.Update("", Change("trace_rate", std::nullopt))->rate, 1u);
}

TEST(TraceSettings, WithoutACollectorOnlyOffIsAccepted) {
  TraceSettings settings({.level = kTraceLevelOff, .rate = 100}, /*exporting=*/false);
  const Result<TraceSettingValues> on = settings.Update("m", Change("trace_level", Values({"TIMESTAMPS"})));
  ASSERT_FALSE(on.ok());
  EXPECT_NE(on.status().message().find("--trace-otlp-endpoint"), std::string::npos);
  EXPECT_TRUE(settings.Update("", Change("trace_rate", Values({"5"}))).ok());
  EXPECT_EQ(settings.Get("m").rate, 5u);
}

TEST(TraceSettings, LevelsAndNamesRoundTrip) {
  EXPECT_EQ(Change("trace_level", Values({"TIMESTAMPS", "TENSORS"})).level.value,
            kTraceLevelTimestamps | kTraceLevelTensors);
  EXPECT_EQ(TraceLevelNames(kTraceLevelTimestamps | kTraceLevelTensors),
            (std::vector<std::string>{"TIMESTAMPS", "TENSORS"}));
  EXPECT_EQ(TraceLevelNames(kTraceLevelOff), std::vector<std::string>{"OFF"});
}

TEST(TraceSettings, ParseErrorsUseTritonsWords) {
  EXPECT_EQ(ParseError("trace_file", Values({"x"})).code(), StatusCode::kUnsupported);
  EXPECT_NE(ParseError("trace_rate", Values({"12abc"})).message().find("Unable to parse 'trace_rate', got: 12abc"),
            std::string::npos);
  EXPECT_NE(ParseError("trace_rate", Values({"4294967296"})).message().find("out of range"), std::string::npos);
  EXPECT_NE(ParseError("trace_count", Values({"-2"})).message().find("Expecting value >= -1"), std::string::npos);
  EXPECT_NE(ParseError("trace_level", Values({"OFF", "TENSORS"})).message().find("only one trace level 'OFF'"),
            std::string::npos);
  EXPECT_NE(ParseError("log_frequency", Values({"1", "2"})).message().find("expect only 1 value"),
            std::string::npos);
  EXPECT_EQ(ParseError("trace_mode", Values({"triton"})).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TraceSettings::RateForFraction(0.01), 100u);
  EXPECT_EQ(TraceSettings::RateForFraction(0.0), 0u);
  EXPECT_EQ(TraceSettings::RateForFraction(1.0), 1u);
}

}  // namespace
}  // namespace ortserve::tracing
