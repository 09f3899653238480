#pragma once
// The per-call state machines of the gRPC front end. Each call is an object
// that owns its ServerContext, request and response; completion-queue tags
// point at a Tag inside it. The kinds of call live in their own files
// (UnaryCall.h, InferCall: the generic service's calls, StreamCall,
// ModelControlCall.h; GenericCall answers the health check); this
// is what they share. Internal to src/server/grpc.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <grpcpp/alarm.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "core/AccessLogRecord.h"
#include "core/InferenceRequest.h"
#include "server/grpc/HandedOverConnections.h"

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

// Wakes `cq` with `tag` from any thread: an alarm whose deadline has passed.
void WakeQueue(grpc::Alarm* alarm, grpc::ServerCompletionQueue* cq, Tag* tag);

// The W3C traceparent a call carries (repeated metadata joined with ','), or
// nullopt.
std::optional<std::string> TraceparentOf(const grpc::ServerContext& ctx);

// The call's client id for quotas: the metadata value of `header` (lowercase;
// empty: none), else the peer's IP address (gRPC's peer() without the
// "ipv4:"/"ipv6:" scheme and the port; for a connection ortserve accepted,
// which gRPC calls "fd:<n>", the address the acceptor kept in `connections`).
std::string ClientIdOf(const grpc::ServerContext& ctx, const std::string& header,
                       const HandedOverConnections& connections);

// The access-log record of one answered infer request: a ModelInfer call
// ("grpc") or one ModelStreamInfer response ("grpc-stream"). `response` is
// null when the request failed.
AccessLogRecord InferAccessRecord(std::string_view protocol, std::string_view request_id,
                                  std::string_view model, std::string_view version,
                                  grpc::StatusCode code, const InferenceResponse* response,
                                  uint64_t bytes_in, uint64_t bytes_out);

}  // namespace ortserve::grpcfe
