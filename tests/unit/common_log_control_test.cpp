// LogControl: the server log's run-time settings (Triton's logging
// extension) applied to spdlog's default logger, checked in the log file.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include <unistd.h>

#include "core/LogContext.h"
#include "core/Utf8.h"
#include "server/common/LogControl.h"

namespace ortserve::common {
namespace {

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(LogControl, SwitchesLevelsAndFormatsWhileLogging) {
  const auto path = std::filesystem::temp_directory_path() / ("log_control_test_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  auto control = LogControl::Install({.file = path.string()});
  ASSERT_TRUE(control.ok()) << control.status().message();

  spdlog::info("info one");
  spdlog::debug("debug hidden");
  LogSettingsChange quiet_info;
  quiet_info.info = false;
  quiet_info.verbose_level = 2u;
  (*control)->Apply(quiet_info);
  spdlog::info("info hidden");
  spdlog::warn("warning shown");
  spdlog::trace("trace shown");
  LogSettingsChange iso_without_errors;
  iso_without_errors.info = true;
  iso_without_errors.error = false;
  iso_without_errors.format = LogFormat::kIso8601;
  (*control)->Apply(iso_without_errors);
  spdlog::error("error hidden");
  spdlog::info("iso line");

  const std::string log = ReadAll(path);
  EXPECT_NE(log.find("info one"), std::string::npos);
  EXPECT_EQ(log.find("hidden"), std::string::npos) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(\nW\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+\] warning shown)")))
      << log;
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(\nI\d{4} [^\n]*\] trace shown)"))) << log;
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z I \d+\] iso line)")))
      << log;

  const LogSettings now = (*control)->Current();
  EXPECT_EQ(now.file, path.string());
  EXPECT_TRUE(now.info);
  EXPECT_FALSE(now.error);
  EXPECT_EQ(now.verbose_level, 2u);
  EXPECT_EQ(LogFormatName(now.format), "ISO8601");
  std::filesystem::remove(path);
}

TEST(LogControl, LinesQuotingBytesThatAreNoUtf8AreWrittenAsUtf8) {
  const auto path = std::filesystem::temp_directory_path() / ("log_control_utf8_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  auto control = LogControl::Install({.file = path.string()});
  ASSERT_TRUE(control.ok()) << control.status().message();
  spdlog::warn("model '{}': not found", std::string_view("\xc0\xae\xc3\xa9"));
  spdlog::info("plain line");
  const std::string log = ReadAll(path);
  EXPECT_TRUE(IsValidUtf8(log)) << log;
  EXPECT_NE(log.find("model '\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9': not found"), std::string::npos) << log;
  EXPECT_NE(log.find("plain line"), std::string::npos) << log;
  std::filesystem::remove(path);
}

TEST(LogControl, NamesAndRefusals) {
  EXPECT_EQ(ParseLogFormat("ISO8601"), LogFormat::kIso8601);
  EXPECT_EQ(ParseLogFormat("default"), LogFormat::kDefault);
  EXPECT_FALSE(ParseLogFormat("iso8601"));
  EXPECT_EQ(LogFileNotChangeable().code(), StatusCode::kUnsupported);
  EXPECT_NE(UnknownLogFormat("xml").message().find("invalid argument for log_format, got: xml"), std::string::npos);
  EXPECT_FALSE(LogControl::Install({.file = "/dev/null/ortserve.log"}).ok());
}

TEST(LogControl, JsonLinesCarryTheRequestScope) {
  const auto path = std::filesystem::temp_directory_path() / ("log_control_json_" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  auto control = LogControl::Install({.file = path.string(), .format = LogFormat::kJson});
  ASSERT_TRUE(control.ok()) << control.status().message();
  spdlog::warn("quote \" and \x01 and {}", std::string_view("\xff"));
  {
    LogContext context;
    context.model = "m";
    context.version = "2";
    context.request_id = "r1";
    context.trace_id.bytes[0] = 0xab;
    context.trace_id.bytes[15] = 0x01;
    context.span_id.bytes[7] = 0xef;
    LogScope scope(context);
    spdlog::info("in scope");
  }
  {
    // A request scope keeps its own copy: the request's strings may go away.
    auto id = std::make_unique<std::string>("a request id longer than the inline buffer");
    RequestTrace trace;
    trace.trace_id.bytes[1] = 0x10;
    trace.span_id.bytes[0] = 0x02;
    RequestLogScope scope("m2", "3", *id, &trace);
    id.reset();
    spdlog::info("handling");
  }
  spdlog::info("after scope");
  const std::string log = ReadAll(path);
  EXPECT_TRUE(std::regex_search(
      log, std::regex(R"(^\{"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z","level":"WARNING","thread":\d+,)"
                      R"("message":"quote \\" and \\u0001 and )" "\xef\xbf\xbd" R"("\}\n)")))
      << log;
  EXPECT_NE(log.find(R"("level":"INFO","thread":)"), std::string::npos) << log;
  EXPECT_NE(log.find(R"("message":"in scope","model":"m","version":"2","request_id":"r1",)"
                     R"("trace_id":"ab000000000000000000000000000001","span_id":"00000000000000ef"}
)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(R"("message":"handling","model":"m2","version":"3",)"
                     R"("request_id":"a request id longer than the inline buffer",)"
                     R"("trace_id":"00100000000000000000000000000000","span_id":"0200000000000000"}
)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find(R"("message":"after scope"}
)"), std::string::npos) << log;
  EXPECT_EQ(LogFormatName((*control)->Current().format), "json");
  EXPECT_EQ(ParseLogFormat("json"), LogFormat::kJson);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ortserve::common
