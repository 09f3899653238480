#pragma once
// The per-call state machines of the gRPC front end. Each call is an object
// that owns its ServerContext, request and response; completion-queue tags
// point at a Tag inside it. Internal to src/server/grpc.
#include <grpcpp/completion_queue.h>

namespace ortserve::grpcfe {

class GrpcServiceCore;

// What a completion-queue tag points at.
class CallBase;
struct Tag {
  CallBase* call;
  int event;
};

class CallBase {
 public:
  explicit CallBase(GrpcServiceCore* core);
  virtual ~CallBase();
  CallBase(const CallBase&) = delete;
  CallBase& operator=(const CallBase&) = delete;
  // Called on the polling thread of the call's queue.
  virtual void OnEvent(int event, bool ok) = 0;

 protected:
  // A client call arrived on this object (it counts as active until destroyed).
  void MarkStarted();

  GrpcServiceCore* const core_;

 private:
  bool started_ = false;
};

// Posts one listener for every method (and for the health check) on `cq`;
// each listener posts its successor when a call arrives.
void StartListening(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq);

// Runs the completion-queue loop until the queue is shut down and drained.
void PollQueue(grpc::ServerCompletionQueue* cq);

}  // namespace ortserve::grpcfe
