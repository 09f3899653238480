#pragma once
// gRPC 1.51's socket mutator types, which Debian's libgrpc-dev does not
// install: a layout-identical copy of src/core/lib/iomgr/socket_mutator.h of
// gRPC v1.51.1 (grpc_fd_usage, grpc_mutate_socket_info,
// grpc_socket_mutator_vtable, struct grpc_socket_mutator). Checked against
// the installed libgrpc.so.29 (1.51.1): grpc_socket_mutator_init stores the
// vtable at offset 0 and the refcount at 8; grpc_socket_mutator_mutate_fd
// calls the vtable's fourth pointer (mutate_fd_2) with {fd, usage} when it is
// set and answers true itself for usage 2 (GRPC_FD_SERVER_CONNECTION_USAGE).
//
// With any other gRPC nothing is declared and ORTSERVE_GRPC_SOCKET_MUTATOR_ABI
// stays undefined (a changed layout would corrupt memory at run time), so the
// TLS port has no connection limit and the server says so at start
// (TlsConnectionGate.h). For a new release: check its socket_mutator.h, then
// add its version here. Only TlsConnectionGate.cpp includes it.
#include <grpcpp/version_info.h>

#if defined(GRPC_CPP_VERSION_MAJOR) && GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51
#define ORTSERVE_GRPC_SOCKET_MUTATOR_ABI 1

#include <cstddef>

#include <grpc/impl/codegen/grpc_types.h>  // declares struct grpc_socket_mutator
#include <grpc/support/sync.h>             // gpr_refcount

typedef enum {
  GRPC_FD_CLIENT_CONNECTION_USAGE,
  GRPC_FD_SERVER_LISTENER_USAGE,
  GRPC_FD_SERVER_CONNECTION_USAGE,
} grpc_fd_usage;

typedef struct {
  int fd;
  grpc_fd_usage usage;
} grpc_mutate_socket_info;

struct grpc_socket_mutator_vtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const grpc_mutate_socket_info* info, grpc_socket_mutator* mutator);
};

struct grpc_socket_mutator {
  const grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};

static_assert(sizeof(grpc_mutate_socket_info) == 8 && offsetof(grpc_mutate_socket_info, usage) == 4);
static_assert(offsetof(grpc_socket_mutator_vtable, mutate_fd_2) == 3 * sizeof(void*));
static_assert(offsetof(grpc_socket_mutator, refcount) == sizeof(void*));

#endif  // gRPC 1.51
