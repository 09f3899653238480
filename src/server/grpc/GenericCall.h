#pragma once
// grpc.health.v1.Health/Check, and an UNIMPLEMENTED answer for every method
// nobody registered, through the generic service. Internal to
// src/server/grpc.
#include <grpcpp/completion_queue.h>

namespace ortserve::grpcfe {

class GrpcServiceCore;

void ListenGeneric(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq);

}  // namespace ortserve::grpcfe
