// RefusedConnections: every refusal counted; the log line at the first and at
// every 1000th only, naming the endpoint, its limit and flag, and the count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "server/common/RefusedConnections.h"

namespace ortserve::common {
namespace {

using ::testing::ElementsAre;

// The lines logged through the default logger while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out_);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

TEST(RefusedConnections, CountsEveryRefusalAndLogsTheFirstAndEveryThousandth) {
  CapturedLog log;
  RefusedConnections refused("grpc", "--grpc-max-connections", "closed unanswered");
  EXPECT_EQ(refused.count(), 0u);
  for (int i = 0; i < 2001; ++i) refused.Count(64);
  EXPECT_EQ(refused.count(), 2001u);
  EXPECT_THAT(log.Lines(),
              ElementsAre("grpc: 64 open connections, the limit (--grpc-max-connections); 1 connection(s) closed "
                          "unanswered so far",
                          "grpc: 64 open connections, the limit (--grpc-max-connections); 1000 connection(s) closed "
                          "unanswered so far",
                          "grpc: 64 open connections, the limit (--grpc-max-connections); 2000 connection(s) closed "
                          "unanswered so far"));
}

}  // namespace
}  // namespace ortserve::common
