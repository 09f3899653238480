#pragma once
// ModelStreamInfer: many requests on one bidirectional stream, each admitted
// on its own (server/common/InferAdmission.h) and answered in completion
// order. Internal to src/server/grpc.
#include <grpcpp/completion_queue.h>

namespace ortserve::grpcfe {

class GrpcServiceCore;

void ListenModelStreamInfer(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq);

}  // namespace ortserve::grpcfe
