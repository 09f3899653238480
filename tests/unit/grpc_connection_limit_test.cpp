// ConnectionLimit and the TLS gate's decision: below --grpc-max-connections a
// connection gRPC accepted is remembered and left alone; at the limit it is
// shut down (its peer reads the end of the stream) and counted, until one of
// the connections served closes.
#include "server/grpc/ConnectionLimit.h"

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "SocketPair.h"
#include "server/grpc/TlsConnectionGate.h"

namespace ortserve::grpcfe {
namespace {

using Pair = SocketPair;

TEST(ConnectionLimit, AdmitsUpToTheLimitThenRefuses) {
  HandedOverConnections connections;
  ConnectionLimit limit(2, &connections);
  Pair a, b, c;
  EXPECT_TRUE(limit.Admit(a.fds[0], ""));
  EXPECT_TRUE(limit.Admit(b.fds[0], ""));
  EXPECT_FALSE(limit.Admit(c.fds[0], ""));
  EXPECT_EQ(limit.Refused(), 1u);
  EXPECT_EQ(limit.Open(), 2u);
}

TEST(ConnectionLimit, PendingConnectionsCount) {
  HandedOverConnections connections;
  ConnectionLimit limit(2, &connections);
  Pair a;
  EXPECT_TRUE(limit.Admit(a.fds[0], ""));
  EXPECT_FALSE(limit.Full(0));
  EXPECT_TRUE(limit.Full(1));
}

TEST(ConnectionLimit, AdmitsAgainOnceAConnectionClosed) {
  HandedOverConnections connections;
  ConnectionLimit limit(1, &connections);
  Pair a, b;
  ASSERT_TRUE(limit.Admit(a.fds[0], ""));
  a.CloseServerSide();  // gRPC closed it
  // The entries are checked at most once per interval; the first check is due.
  EXPECT_TRUE(limit.Admit(b.fds[0], ""));
  EXPECT_EQ(limit.Open(), 1u);
}

TEST(ConnectionLimit, AtTheLimitChecksAtMostOncePerInterval) {
  HandedOverConnections connections;
  ConnectionLimit limit(1, &connections);
  Pair a, b, c;
  ASSERT_TRUE(limit.Admit(a.fds[0], ""));
  EXPECT_FALSE(limit.Admit(b.fds[0], ""));  // checked: full
  a.CloseServerSide();
  EXPECT_FALSE(limit.Admit(c.fds[0], ""));  // not checked again yet
  std::this_thread::sleep_for(ConnectionLimit::kCheckInterval);
  EXPECT_TRUE(limit.Admit(c.fds[0], ""));
}

TEST(TlsConnectionGate, ShutsDownAConnectionOverTheLimit) {
  HandedOverConnections connections;
  ConnectionLimit limit(1, &connections);
  Pair served, refused;
  EXPECT_TRUE(GateAcceptedConnection(limit, served.fds[0]));
  EXPECT_FALSE(served.ClientSeesEnd());
  EXPECT_FALSE(GateAcceptedConnection(limit, refused.fds[0]));
  // Shut down, not closed: the descriptor stays gRPC's to close.
  EXPECT_TRUE(refused.ClientSeesEnd());
  EXPECT_EQ(limit.Refused(), 1u);
  EXPECT_EQ(limit.Open(), 1u);
}

TEST(TlsConnectionGate, ConcurrentAcceptsNeverPassTheLimit) {
  HandedOverConnections connections;
  constexpr size_t kLimit = 8;
  ConnectionLimit limit(kLimit, &connections);
  std::vector<std::unique_ptr<Pair>> pairs(64);
  for (auto& pair : pairs) pair = std::make_unique<Pair>();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < pairs.size(); i += 4) GateAcceptedConnection(limit, pairs[i]->fds[0]);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(limit.Open(), kLimit);
  EXPECT_EQ(limit.Refused(), pairs.size() - kLimit);
}

}  // namespace
}  // namespace ortserve::grpcfe
