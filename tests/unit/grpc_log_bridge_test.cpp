// GrpcLogBridge: gRPC's lines reach ortserve's logger, and gRPC's own TLS
// acceptor giving up (`Failed accept4`) marks the server not live; on a
// plaintext port (ortserve's acceptor) the same text changes nothing.
#include "server/grpc/GrpcLogBridge.h"

#include <grpc/support/log.h>
#include <gtest/gtest.h>

#include "server/common/Liveness.h"

namespace ortserve::grpcfe {
namespace {

class GrpcLogBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override { common::ResetLivenessForTesting(); }
  void TearDown() override { common::ResetLivenessForTesting(); }
};

TEST_F(GrpcLogBridgeTest, AcceptorFailureOnATlsPortEndsLiveness) {
  RouteGrpcLogs(/*tls_listener=*/true);
  HandleGrpcLogLine(GPR_LOG_SEVERITY_ERROR, "src/core/lib/iomgr/tcp_server_posix.cc", 397,
                    "Failed accept4: Too many open files");
  auto reason = common::NotLiveReason();
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("TLS port"), std::string::npos) << *reason;
  EXPECT_NE(reason->find("Failed accept4: Too many open files"), std::string::npos) << *reason;
}

TEST_F(GrpcLogBridgeTest, TheFirstReasonIsKept) {
  RouteGrpcLogs(true);
  HandleGrpcLogLine(GPR_LOG_SEVERITY_ERROR, "a.cc", 1, "Failed accept4: Too many open files");
  HandleGrpcLogLine(GPR_LOG_SEVERITY_ERROR, "a.cc", 1, "Failed accept4: Cannot allocate memory");
  EXPECT_NE(common::NotLiveReason()->find("Too many open files"), std::string::npos);
}

TEST_F(GrpcLogBridgeTest, PlaintextPortsAndOtherLinesLeaveLiveness) {
  RouteGrpcLogs(/*tls_listener=*/false);
  HandleGrpcLogLine(GPR_LOG_SEVERITY_ERROR, "tcp_server_posix.cc", 397, "Failed accept4: Too many open files");
  EXPECT_FALSE(common::NotLiveReason().has_value());
  RouteGrpcLogs(true);
  HandleGrpcLogLine(GPR_LOG_SEVERITY_ERROR, nullptr, 0, "Handshake failed with fatal error SSL_ERROR_SSL");
  HandleGrpcLogLine(GPR_LOG_SEVERITY_INFO, "x.cc", 2, "not Failed accept4 at the start");
  EXPECT_FALSE(common::NotLiveReason().has_value());
}

TEST_F(GrpcLogBridgeTest, GprLogReachesTheBridge) {
  RouteGrpcLogs(true);
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);
  gpr_log(__FILE__, __LINE__, GPR_LOG_SEVERITY_ERROR, "Failed accept4: %s", "Too many open files");
  EXPECT_TRUE(common::NotLiveReason().has_value());
}

}  // namespace
}  // namespace ortserve::grpcfe
