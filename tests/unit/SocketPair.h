#pragma once
// A connected AF_UNIX socket pair standing in for a client connection in the
// gRPC front end's connection tests: fds[0] is the server's side (what an
// acceptor hands over), fds[1] the client's. Both are closed at the end.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace ortserve::grpcfe {

struct SocketPair {
  int fds[2] = {-1, -1};
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0); }
  ~SocketPair() {
    CloseServerSide();
    CloseClientSide();
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
  void CloseServerSide() { CloseAt(0); }
  void CloseClientSide() { CloseAt(1); }
  // Whether the client's end reads the end of the stream (without waiting).
  bool ClientSeesEnd() const {
    char byte = 0;
    return recv(fds[1], &byte, 1, MSG_DONTWAIT) == 0;
  }

 private:
  void CloseAt(int i) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
};

}  // namespace ortserve::grpcfe
