#include "server/grpc/GrpcCalls.h"

#include <charconv>
#include <optional>
#include <string>

#include "core/Trace.h"
#include "server/grpc/GrpcServiceCore.h"
#include "server/grpc/InferCall.h"
#include "server/grpc/ModelControlCall.h"
#include "server/grpc/SharedMemoryCalls.h"
#include "server/grpc/SettingsCalls.h"
#include "server/grpc/StreamCall.h"
#include "server/grpc/UnaryCall.h"

namespace ortserve::grpcfe {

CallBase::CallBase(GrpcServiceCore* core) : core_(core) { core_->CallCreated(); }
CallBase::~CallBase() {
  if (started_) core_->CallEnded();
  core_->CallDestroyed();
}

void CallBase::MarkStarted() {
  if (started_) return;
  started_ = true;
  core_->CallStarted();
}

void PollQueue(grpc::ServerCompletionQueue* cq) {
  void* raw = nullptr;
  bool ok = false;
  while (cq->Next(&raw, &ok)) {
    Tag* tag = static_cast<Tag*>(raw);
    tag->call->OnEvent(tag->event, ok);
  }
}

void WakeQueue(grpc::Alarm* alarm, grpc::ServerCompletionQueue* cq, Tag* tag) {
  alarm->Set(cq, gpr_time_0(GPR_CLOCK_MONOTONIC), tag);
}

std::optional<std::string> TraceparentOf(const grpc::ServerContext& ctx) {
  std::optional<std::string> traceparent;
  for (auto [it, end] = ctx.client_metadata().equal_range("traceparent"); it != end; ++it) {
    AddTraceparentValue(&traceparent, std::string_view(it->second.data(), it->second.size()));
  }
  return traceparent;
}

std::string ClientIdOf(const grpc::ServerContext& ctx, const std::string& header,
                       const HandedOverConnections& connections) {
  if (!header.empty()) {
    if (auto it = ctx.client_metadata().find(header); it != ctx.client_metadata().end() && !it->second.empty())
      return std::string(it->second.data(), it->second.size());
  }
  std::string peer = ctx.peer();
  if (peer.compare(0, 3, "fd:") == 0) {
    int fd = -1;
    const char* digits = peer.data() + 3;
    if (std::from_chars(digits, peer.data() + peer.size(), fd).ec == std::errc()) {
      if (std::optional<std::string> ip = connections.PeerOf(fd)) return std::move(*ip);
    }
  }
  if (size_t colon = peer.find(':'); colon != std::string::npos && peer.compare(0, 3, "ipv") == 0)
    peer.erase(0, colon + 1);
  if (size_t colon = peer.rfind(':'); colon != std::string::npos && peer.find(':') == colon) peer.erase(colon);
  if (peer.size() > 2 && peer.front() == '[') {
    if (size_t close = peer.find(']'); close != std::string::npos) peer = peer.substr(1, close - 1);
  }
  return peer;
}

AccessLogRecord InferAccessRecord(std::string_view protocol, std::string_view request_id,
                                  std::string_view model, std::string_view version,
                                  grpc::StatusCode code, const InferenceResponse* response,
                                  uint64_t bytes_in, uint64_t bytes_out) {
  AccessLogRecord record;
  record.protocol = protocol;
  record.request_id = request_id;
  record.model = model;
  record.version = version;
  record.status_code = static_cast<int>(code);
  record.bytes_in = bytes_in;
  record.bytes_out = bytes_out;
  if (response) record.SetResponse(*response);
  return record;
}

namespace {

template <typename Req, typename Resp>
grpc::Status NotImplemented(GrpcServiceCore&, const Req&, Resp*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      std::string(Req::descriptor()->name()) + ": this extension is not implemented by ortserve");
}

#define ORTSERVE_HANDLER(method)                                                                      \
  [](GrpcServiceCore& core, const inference::method##Request& request,                                \
     inference::method##Response* response) { return core.method(request, response); }
#define ORTSERVE_LISTEN(method, group, handler)                                                    \
  ListenUnary<inference::method##Request, inference::method##Response>(core, cq, auth::ApiGroup::group, \
                                                                       &Service::Request##method, handler)
#define ORTSERVE_LISTEN_UNIMPLEMENTED(method, group) \
  ORTSERVE_LISTEN(method, group, (&NotImplemented<inference::method##Request, inference::method##Response>))

}  // namespace

void StartListening(GrpcServiceCore* core, grpc::ServerCompletionQueue* cq) {
  // API groups as Triton's --grpc-restricted-protocol maps them.
  ORTSERVE_LISTEN(ServerLive, kHealth, ORTSERVE_HANDLER(ServerLive));
  ORTSERVE_LISTEN(ServerReady, kHealth, ORTSERVE_HANDLER(ServerReady));
  ORTSERVE_LISTEN(ModelReady, kHealth, ORTSERVE_HANDLER(ModelReady));
  ORTSERVE_LISTEN(ServerMetadata, kMetadata, ORTSERVE_HANDLER(ServerMetadata));
  ORTSERVE_LISTEN(ModelMetadata, kMetadata, ORTSERVE_HANDLER(ModelMetadata));
  ORTSERVE_LISTEN(ModelConfig, kModelConfig, ORTSERVE_HANDLER(ModelConfig));
  ORTSERVE_LISTEN(ModelStatistics, kStatistics, ORTSERVE_HANDLER(ModelStatistics));
  ORTSERVE_LISTEN(RepositoryIndex, kModelRepository, ORTSERVE_HANDLER(RepositoryIndex));
  ModelControlCall<inference::RepositoryModelLoadRequest, inference::RepositoryModelLoadResponse,
                   true>::Listen(core, cq, &Service::RequestRepositoryModelLoad);
  ModelControlCall<inference::RepositoryModelUnloadRequest, inference::RepositoryModelUnloadResponse,
                   false>::Listen(core, cq, &Service::RequestRepositoryModelUnload);
  ORTSERVE_LISTEN(SystemSharedMemoryStatus, kSharedMemory, &SystemSharedMemoryStatus);
  ORTSERVE_LISTEN(SystemSharedMemoryRegister, kSharedMemory, &SystemSharedMemoryRegister);
  ORTSERVE_LISTEN(SystemSharedMemoryUnregister, kSharedMemory, &SystemSharedMemoryUnregister);
  ORTSERVE_LISTEN(CudaSharedMemoryStatus, kSharedMemory, &CudaSharedMemoryStatus);
  ORTSERVE_LISTEN(CudaSharedMemoryRegister, kSharedMemory, &CudaSharedMemoryRegister);
  ORTSERVE_LISTEN(CudaSharedMemoryUnregister, kSharedMemory, &CudaSharedMemoryUnregister);
  ORTSERVE_LISTEN(TraceSetting, kTrace, &TraceSetting);
  ORTSERVE_LISTEN(LogSettings, kLogging, &LogSettings);
  ListenModelStreamInfer(core, cq);
  // Two pending generic listeners (ModelInfer among their methods) per queue,
  // so that a burst of calls finds one posted while the previous is being
  // re-posted.
  ListenGeneric(core, cq);
  ListenGeneric(core, cq);
}

}  // namespace ortserve::grpcfe

