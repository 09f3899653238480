// HandedOverConnections: entries leave once their descriptor is closed or
// names another file, which is all the acceptor learns of gRPC's closes.
#include "server/grpc/HandedOverConnections.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "SocketPair.h"

namespace ortserve::grpcfe {
namespace {

using Pair = SocketPair;

TEST(HandedOverConnections, CountsOpenDescriptors) {
  HandedOverConnections connections;
  Pair a, b;
  connections.Add(a.fds[0], "");
  connections.Add(b.fds[0], "");
  EXPECT_EQ(connections.Remembered(), 2u);
  EXPECT_EQ(connections.Open(), 2u);
}

TEST(HandedOverConnections, DropsClosedDescriptorsWhenChecked) {
  HandedOverConnections connections;
  Pair a, b;
  connections.Add(a.fds[0], "");
  connections.Add(b.fds[0], "");
  a.CloseServerSide();
  EXPECT_EQ(connections.Remembered(), 2u);  // not checked yet
  EXPECT_EQ(connections.Open(), 1u);
  EXPECT_EQ(connections.Remembered(), 1u);
}

TEST(HandedOverConnections, DropsADescriptorNumberReusedForAnotherSocket) {
  HandedOverConnections connections;
  Pair a, other;
  connections.Add(a.fds[0], "");
  // The number now names another socket: the connection handed over is gone.
  ASSERT_EQ(dup2(other.fds[0], a.fds[0]), a.fds[0]);
  EXPECT_EQ(connections.Open(), 0u);
}

TEST(HandedOverConnections, ANumberAddedAgainCountsOnce) {
  HandedOverConnections connections;
  Pair a;
  connections.Add(a.fds[0], "");
  connections.Add(a.fds[0], "");
  EXPECT_EQ(connections.Open(), 1u);
}

TEST(HandedOverConnections, AClosedDescriptorIsNotAdded) {
  HandedOverConnections connections;
  int fd = -1;
  {
    Pair a;
    fd = a.fds[0];
  }
  connections.Add(fd, "");
  EXPECT_EQ(connections.Remembered(), 0u);
}

TEST(HandedOverConnections, KnowsThePeerOfADescriptorWhileItNamesTheConnection) {
  HandedOverConnections connections;
  Pair a, other;
  connections.Add(a.fds[0], "192.0.2.7");
  EXPECT_EQ(connections.PeerOf(a.fds[0]), "192.0.2.7");
  EXPECT_EQ(connections.PeerOf(other.fds[0]), std::nullopt);  // never handed over
  ASSERT_EQ(dup2(other.fds[0], a.fds[0]), a.fds[0]);
  EXPECT_EQ(connections.PeerOf(a.fds[0]), std::nullopt);
}

}  // namespace
}  // namespace ortserve::grpcfe
