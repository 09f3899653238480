#pragma once
// The connections ortserve's gRPC acceptor handed to gRPC, counted for
// --grpc-max-connections. gRPC 1.51 says nothing when it closes one, so each
// descriptor is remembered with the identity of its socket (st_dev, st_ino)
// and an entry is dropped once its descriptor is closed or names another
// file (the number reused). Open() checks every entry (one fstat each), so
// its cost is proportional to the connections held, bounded by the limit;
// the acceptor calls it only at the limit, the metrics on a scrape.
//
// It also keeps each connection's peer address: gRPC names a connection
// handed over "fd:<n>" (ServerContext::peer()), not by its peer, and the
// quotas need the client's IP address (ClientIdOf).
//
// Thread-safe. Internal to src/server/grpc.
#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace ortserve::grpcfe {

class HandedOverConnections {
 public:
  // Remembers `fd`, an open socket about to be handed over, whose client is
  // at `peer_ip`. An entry for the same number is replaced: that descriptor
  // was closed for this one to get it.
  void Add(int fd, std::string peer_ip);
  // The peer IP address of the connection handed over as `fd` while that
  // descriptor is still that connection's; nullopt otherwise.
  std::optional<std::string> PeerOf(int fd) const;
  // Drops the entries whose connection gRPC has closed; what is left.
  size_t Open();
  // Entries without checking them: at least the connections open.
  size_t Remembered() const;

 private:
  struct Identity {
    dev_t dev;
    ino_t ino;
    std::string peer_ip;
  };
  static bool Names(int fd, const Identity& identity);
  mutable std::mutex mu_;
  std::unordered_map<int, Identity> fds_;  // guarded by mu_
};

}  // namespace ortserve::grpcfe
