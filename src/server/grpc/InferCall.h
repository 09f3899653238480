#pragma once
// ModelInfer: one unary call per request, decoded on the polling thread,
// admitted to its model (server/common/InferAdmission.h), and answered on the
// polling thread once the model's completion wakes the queue. Internal to
// src/server/grpc.
#include <grpcpp/completion_queue.h>

namespace ortserve::grpcfe {

class GrpcServiceCore;

void ListenModelInfer(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq);

}  // namespace ortserve::grpcfe
