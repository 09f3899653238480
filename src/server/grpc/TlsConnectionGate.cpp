#include "server/grpc/TlsConnectionGate.h"

#include <sys/socket.h>

#include <utility>
#include <vector>

#include <grpcpp/support/channel_arguments.h>

#include "server/grpc/GrpcSocketMutatorAbi.h"

namespace ortserve::grpcfe {

#ifdef ORTSERVE_GRPC_SOCKET_MUTATOR_ABI
namespace {

// gRPC sees the grpc_socket_mutator base; the vtable's functions cast back.
// gRPC owns it: Destroy runs when its last reference goes.
struct LimitMutator : grpc_socket_mutator {
  explicit LimitMutator(std::shared_ptr<ConnectionLimit> l) : grpc_socket_mutator{}, limit(std::move(l)) {}
  std::shared_ptr<ConnectionLimit> limit;
};

LimitMutator* Of(grpc_socket_mutator* mutator) { return static_cast<LimitMutator*>(mutator); }

bool MutateFd(const grpc_mutate_socket_info* info, grpc_socket_mutator* mutator) {
  if (info->usage == GRPC_FD_SERVER_CONNECTION_USAGE) GateAcceptedConnection(*Of(mutator)->limit, info->fd);
  return true;  // false would close gRPC's listener for good
}

bool MutateFdUnused(int, grpc_socket_mutator*) { return true; }  // mutate_fd_2 takes precedence

int Compare(grpc_socket_mutator* a, grpc_socket_mutator* b) { return a < b ? -1 : (a > b ? 1 : 0); }

void Destroy(grpc_socket_mutator* mutator) { delete Of(mutator); }

constexpr grpc_socket_mutator_vtable kVtable{MutateFdUnused, Compare, Destroy, MutateFd};

class GateOption : public grpc::ServerBuilderOption {
 public:
  explicit GateOption(std::shared_ptr<ConnectionLimit> limit) : limit_(std::move(limit)) {}

  void UpdateArguments(grpc::ChannelArguments* args) override {
    auto* mutator = new LimitMutator(limit_);
    // What grpc_socket_mutator_init does (exported by 1.51 under a C++ name
    // from a header it does not install): one reference, the arguments'.
    mutator->vtable = &kVtable;
    gpr_ref_init(&mutator->refcount, 1);
    args->SetSocketMutator(mutator);
  }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}

 private:
  std::shared_ptr<ConnectionLimit> limit_;
};

}  // namespace

bool GateAcceptedConnection(ConnectionLimit& limit, int fd) {
  // gRPC names the peer itself on a TLS port; no address to keep.
  if (limit.Admit(fd, "")) return true;
  shutdown(fd, SHUT_RDWR);
  return false;
}

std::unique_ptr<grpc::ServerBuilderOption> TlsConnectionGate(std::shared_ptr<ConnectionLimit> limit) {
  return std::make_unique<GateOption>(std::move(limit));
}
#else
bool GateAcceptedConnection(ConnectionLimit&, int) { return true; }
std::unique_ptr<grpc::ServerBuilderOption> TlsConnectionGate(std::shared_ptr<ConnectionLimit>) { return nullptr; }
#endif

}  // namespace ortserve::grpcfe
