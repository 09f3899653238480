#include "server/metrics/AccessLog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace ortserve::metrics {
namespace {

TEST(AccessLog, FormatsOneJsonObject) {
  AccessLogRecord r{.protocol = "http", .request_id = "id\"1\n", .model = "m\\x", .version = "3",
                    .status_code = 200, .queue_ns = 12'345, .compute_ns = 2'000'999, .batch_size = 4,
                    .bytes_in = 100, .bytes_out = 64, .trace_id = {}, .span_id = {}};
  EXPECT_EQ(AccessLog::Format(r, 1'700'000'000'123),
            "{\"time\":\"2023-11-14T22:13:20.123Z\",\"request_id\":\"id\\\"1\\n\",\"model\":\"m\\\\x\","
            "\"version\":\"3\",\"protocol\":\"http\",\"status\":200,\"queue_us\":12,\"compute_us\":2000,"
            "\"batch_size\":4,\"bytes_in\":100,\"bytes_out\":64}");
  AccessLogRecord control;
  control.protocol = "grpc";
  control.request_id = std::string_view("\x01", 1);
  EXPECT_NE(AccessLog::Format(control, 5).find("\"request_id\":\"\\u0001\""), std::string::npos);
  EXPECT_NE(AccessLog::Format(control, 5).find("\"time\":\"1970-01-01T00:00:00.005Z\""), std::string::npos);
}

TEST(AccessLog, TracedRequestsCarryTheirIdsAndJsonLogLinesTheLogSchema) {
  AccessLogRecord r;
  r.protocol = "grpc";
  r.model = "m";
  r.version = "1";
  r.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  r.span_id = "00f067aa0ba902b7";
  EXPECT_NE(AccessLog::Format(r, 5).find(
                ",\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"span_id\":\"00f067aa0ba902b7\"}"),
            std::string::npos);
  const auto time = std::chrono::system_clock::time_point(std::chrono::microseconds(1'700'000'000'123'456));
  const std::string line = AccessLog::FormatJsonLogLine(r, time, 77);
  EXPECT_EQ(line.substr(0, 99),
            "{\"time\":\"2023-11-14T22:13:20.123456Z\",\"level\":\"INFO\",\"thread\":77,\"message\":\"access\","
            "\"request_id\":\"\"");
  EXPECT_NE(line.find("\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\""), std::string::npos);
  r.trace_id = r.span_id = {};
  EXPECT_EQ(AccessLog::Format(r, 5).find("trace_id"), std::string::npos);
}

}  // namespace
}  // namespace ortserve::metrics
