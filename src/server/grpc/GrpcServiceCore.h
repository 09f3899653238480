#pragma once
// State shared by every call of one GrpcServer: the async services, the
// repository, the options, the infer admission step (with the stopping flag
// and the requests in flight), the count of live call objects, and the
// handlers of the unary methods that never wait (metadata, readiness,
// config, statistics, index). Internal to src/server/grpc.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "grpc_service.grpc.pb.h"
#include "server/common/InferAdmission.h"
#include "server/grpc/GrpcServer.h"
#include "server/grpc/HandedOverConnections.h"

namespace ortserve {
namespace grpcfe {

// GRPCInferenceService with every method asynchronous except ModelInfer, which
// is left to the generic service (InferCall.h says why).
using InferenceService = inference::GRPCInferenceService;
using AsyncService = InferenceService::WithAsyncMethod_ServerLive<
    InferenceService::WithAsyncMethod_ServerReady<InferenceService::WithAsyncMethod_ModelReady<
        InferenceService::WithAsyncMethod_ServerMetadata<InferenceService::WithAsyncMethod_ModelMetadata<
            InferenceService::WithGenericMethod_ModelInfer<InferenceService::WithAsyncMethod_ModelStreamInfer<
                InferenceService::WithAsyncMethod_ModelConfig<InferenceService::WithAsyncMethod_ModelStatistics<
                    InferenceService::WithAsyncMethod_RepositoryIndex<
                        InferenceService::WithAsyncMethod_RepositoryModelLoad<
                            InferenceService::WithAsyncMethod_RepositoryModelUnload<
                                InferenceService::WithAsyncMethod_SystemSharedMemoryStatus<
                                    InferenceService::WithAsyncMethod_SystemSharedMemoryRegister<
                                        InferenceService::WithAsyncMethod_SystemSharedMemoryUnregister<
                                            InferenceService::WithAsyncMethod_CudaSharedMemoryStatus<
                                                InferenceService::WithAsyncMethod_CudaSharedMemoryRegister<
                                                    InferenceService::WithAsyncMethod_CudaSharedMemoryUnregister<
                                                        InferenceService::WithAsyncMethod_TraceSetting<
                                                            InferenceService::WithAsyncMethod_LogSettings<
                                                                InferenceService::Service>>>>>>>>>>>>>>>>>>>>;

class GrpcServiceCore {
 public:
  GrpcServiceCore(GrpcServerOptions options, ModelRepository* repository)
      : options_(std::move(options)),
        repository_(repository),
        shared_memory_(options_.shared_memory ? options_.shared_memory
                                              : std::make_shared<common::SharedMemoryRegistry>()),
        admission_(repository,
                   {.access_log = options_.access_log, .tracer = options_.tracer, .quotas = options_.quotas.quotas}) {}

  AsyncService& service() { return service_; }
  grpc::AsyncGenericService& generic_service() { return generic_service_; }
  ModelRepository& repository() { return *repository_; }
  const GrpcServerOptions& options() const { return options_; }
  common::SharedMemoryRegistry& shared_memory() { return *shared_memory_; }
  // The connections served (ConnectionLimit.h): handed to gRPC by
  // ortserve's acceptor, or accepted by gRPC's on a TLS port.
  HandedOverConnections& connections() { return connections_; }

  // ModelInfer and ModelStreamInfer requests go through it; its in-flight
  // count is what Stop() drains.
  common::InferAdmission& admission() { return admission_; }
  bool stopping() const { return !admission_.accepting(); }
  void SetStopping() { admission_.StopAccepting(); }
  void SetNotReady() { admission_.MarkNotReady(); }
  bool ServerReady() const;

  // OK when `group` is open or the call carries the restriction's metadata
  // (triton-grpc-protocol-<key>) with the right value; else UNAUTHENTICATED
  // (absent) or PERMISSION_DENIED (wrong), with the policy's RefusalMessage.
  grpc::Status CheckAccess(auth::ApiGroup group, const grpc::ServerContextBase& context) const;
  // Explicit mode without a restricted model-repository group and without
  // allow_unauthenticated_model_control: load/unload are refused.
  bool ModelControlLocked() const;

  // Every call object registers itself for its whole life, so that Stop()
  // shuts the completion queues down only once nothing can touch them.
  void CallCreated();
  void CallDestroyed();
  void WaitForNoCalls();
  // Calls a client has started and the server has not finished with (what
  // the metrics endpoint reports; a stream counts once however many requests
  // it carries).
  void CallStarted() { active_calls_.fetch_add(1, std::memory_order_relaxed); }
  void CallEnded() { active_calls_.fetch_sub(1, std::memory_order_relaxed); }
  size_t active_calls() const { return active_calls_.load(std::memory_order_relaxed); }

  grpc::Status ServerLive(const inference::ServerLiveRequest&, inference::ServerLiveResponse*);
  grpc::Status ServerReady(const inference::ServerReadyRequest&, inference::ServerReadyResponse*);
  grpc::Status ModelReady(const inference::ModelReadyRequest&, inference::ModelReadyResponse*);
  grpc::Status ServerMetadata(const inference::ServerMetadataRequest&,
                              inference::ServerMetadataResponse*);
  grpc::Status ModelMetadata(const inference::ModelMetadataRequest&,
                             inference::ModelMetadataResponse*);
  grpc::Status ModelConfig(const inference::ModelConfigRequest&, inference::ModelConfigResponse*);
  grpc::Status ModelStatistics(const inference::ModelStatisticsRequest&,
                               inference::ModelStatisticsResponse*);
  grpc::Status RepositoryIndex(const inference::RepositoryIndexRequest&,
                               inference::RepositoryIndexResponse*);

 private:
  const GrpcServerOptions options_;
  ModelRepository* const repository_;
  const std::shared_ptr<common::SharedMemoryRegistry> shared_memory_;
  AsyncService service_;
  grpc::AsyncGenericService generic_service_;
  common::InferAdmission admission_;
  HandedOverConnections connections_;

  std::mutex calls_mu_;
  std::condition_variable calls_cv_;
  size_t live_calls_ = 0;  // guarded by calls_mu_
  std::atomic<size_t> active_calls_{0};
};

}  // namespace grpcfe
}  // namespace ortserve
