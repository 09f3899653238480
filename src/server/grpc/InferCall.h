#pragma once
// The calls of the generic service: ModelInfer, grpc.health.v1.Health/Check,
// and UNIMPLEMENTED for every method nobody registered.
//
// ModelInfer is served here rather than by the generated service because a
// generated unary method reaches the server only once its whole message has
// arrived: a generic call arrives with its metadata alone, so the call's
// restricted-protocol credentials are checked before a byte of its message is
// read, and a refused call never holds more than the flow-control window it
// started with. An accepted request is decoded on the polling thread, admitted
// to its model (server/common/InferAdmission.h), and answered on the polling
// thread once the model's completion wakes the queue. Internal to
// src/server/grpc.
#include <grpcpp/completion_queue.h>

namespace ortserve::grpcfe {

class GrpcServiceCore;

void ListenGeneric(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq);

}  // namespace ortserve::grpcfe
