#include "server/grpc/GrpcServer.h"

#include <algorithm>
#include <array>

#include <chrono>
#include <limits>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include <absl/synchronization/mutex.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/version_info.h>
#include <spdlog/spdlog.h>

#include "core/ThreadName.h"
#include "repository/ModelRepository.h"
#include "server/common/Liveness.h"
#include "server/common/ModelMetadata.h"
#include "server/common/Readiness.h"
#include "server/common/StatisticsSnapshot.h"
#include "server/grpc/GrpcAcceptor.h"
#include "server/grpc/GrpcCalls.h"
#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcLogBridge.h"
#include "server/grpc/GrpcServiceCore.h"
#include "server/grpc/TlsConnectionGate.h"

namespace ortserve {
namespace grpcfe {

// ---- GrpcServiceCore ------------------------------------------------------------------

bool GrpcServiceCore::ServerReady() const {
  return !common::NotReadyReason(admission_, *repository_, options_.strict_readiness);
}

void GrpcServiceCore::CallCreated() {
  std::lock_guard lock(calls_mu_);
  ++live_calls_;
}

void GrpcServiceCore::CallDestroyed() {
  std::lock_guard lock(calls_mu_);
  if (--live_calls_ == 0) calls_cv_.notify_all();
}

void GrpcServiceCore::WaitForNoCalls() {
  std::unique_lock lock(calls_mu_);
  while (!calls_cv_.wait_for(lock, std::chrono::seconds(10), [this] { return live_calls_ == 0; })) {
    spdlog::warn("gRPC server stopping: still waiting for {} calls whose inference has not completed",
                 live_calls_);
  }
}

grpc::Status GrpcServiceCore::CheckAccess(auth::ApiGroup group, const grpc::ServerContextBase& context) const {
  const auth::AccessPolicy* policy = options_.access_policy.get();
  if (policy == nullptr) return grpc::Status::OK;
  const auth::AccessPolicy::Restriction* restriction = policy->RestrictionFor(group);
  if (restriction == nullptr) return grpc::Status::OK;
  std::optional<std::string_view> presented;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(grpc::string_ref(restriction->header)); it != metadata.end()) {
    presented = std::string_view(it->second.data(), it->second.size());
  }
  const auth::Verdict verdict = policy->Check(group, presented);
  if (verdict == auth::Verdict::kAllowed) return grpc::Status::OK;
  return grpc::Status(
      verdict == auth::Verdict::kMissing ? grpc::StatusCode::UNAUTHENTICATED : grpc::StatusCode::PERMISSION_DENIED,
      policy->RefusalMessage(group, verdict));
}

bool GrpcServiceCore::ModelControlLocked() const {
  return repository_->control_mode() == ModelControlMode::kExplicit &&
         !options_.allow_unauthenticated_model_control &&
         !(options_.access_policy && options_.access_policy->restricted(auth::ApiGroup::kModelRepository));
}

grpc::Status GrpcServiceCore::ServerLive(const inference::ServerLiveRequest&,
                                         inference::ServerLiveResponse* response) {
  response->set_live(!common::NotLiveReason());
  return grpc::Status::OK;
}

grpc::Status GrpcServiceCore::ServerReady(const inference::ServerReadyRequest&,
                                          inference::ServerReadyResponse* response) {
  response->set_ready(ServerReady());
  return grpc::Status::OK;
}

grpc::Status GrpcServiceCore::ModelReady(const inference::ModelReadyRequest& request,
                                         inference::ModelReadyResponse* response) {
  // As Triton: every version of a model it knows answers OK with `ready`; a
  // model name it does not know is NOT_FOUND ("Request for unknown model: ...").
  Result<bool> ready = IsModelVersionReady(*repository_, request.name(), request.version());
  if (!ready.ok()) return ToGrpcStatus(ready.status());
  response->set_ready(!stopping() && ready.value());
  return grpc::Status::OK;
}

grpc::Status GrpcServiceCore::ServerMetadata(const inference::ServerMetadataRequest&,
                                             inference::ServerMetadataResponse* response) {
  common::ServerMetadata metadata = common::DescribeServer(options_.server_version);
  response->set_name(std::move(metadata.name));
  response->set_version(std::move(metadata.version));
  for (std::string& extension : metadata.extensions) response->add_extensions(std::move(extension));
  return grpc::Status::OK;
}

namespace {

void FillTensorMetadata(const common::TensorMetadata& tensor,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(tensor.name);
  out->set_datatype(std::string(tensor.datatype));
  out->mutable_shape()->Add(tensor.shape.begin(), tensor.shape.end());
}

// Sets the StatisticDuration fields of `message` named by `names` (the
// common::k*DurationNames tables, which are the proto's field names).
template <size_t N>
void FillDurations(const std::array<std::string_view, N>& names,
                   const std::array<common::DurationTotals, N>& totals,
                   google::protobuf::Message* message) {
  const google::protobuf::Descriptor* descriptor = message->GetDescriptor();
  const google::protobuf::Reflection* reflection = message->GetReflection();
  for (size_t i = 0; i < N; ++i) {
    const google::protobuf::FieldDescriptor* field =
        descriptor->FindFieldByName(std::string(names[i]));
    if (field == nullptr) continue;  // never: grpc_server_test checks every name
    auto* duration =
        static_cast<inference::StatisticDuration*>(reflection->MutableMessage(message, field));
    duration->set_count(totals[i].count);
    duration->set_ns(totals[i].ns);
  }
}

void FillStatistics(const common::ModelStatisticsSnapshot& stats, inference::ModelStatistics* out) {
  out->set_name(stats.name);
  out->set_version(stats.version);
  out->set_last_inference(stats.last_inference_ms);
  out->set_inference_count(stats.inference_count);
  out->set_execution_count(stats.execution_count);
  FillDurations(common::kInferenceDurationNames, stats.inference, out->mutable_inference_stats());
  for (const common::BatchStatisticsSnapshot& batch : stats.batches) {
    inference::InferBatchStatistics* entry = out->add_batch_stats();
    entry->set_batch_size(batch.batch_size);
    FillDurations(common::kBatchDurationNames, batch.durations, entry);
  }
}

}  // namespace

grpc::Status GrpcServiceCore::ModelMetadata(const inference::ModelMetadataRequest& request,
                                            inference::ModelMetadataResponse* response) {
  Result<common::ModelMetadata> metadata =
      common::DescribeModel(*repository_, request.name(), request.version());
  if (!metadata.ok()) return ToGrpcStatus(metadata.status());
  response->set_name(metadata->name);
  for (const std::string& version : metadata->versions) response->add_versions(version);
  response->set_platform(metadata->platform);
  for (const common::TensorMetadata& input : metadata->inputs) {
    FillTensorMetadata(input, response->add_inputs());
  }
  for (const common::TensorMetadata& output : metadata->outputs) {
    FillTensorMetadata(output, response->add_outputs());
  }
  return grpc::Status::OK;
}

grpc::Status GrpcServiceCore::ModelConfig(const inference::ModelConfigRequest& request,
                                          inference::ModelConfigResponse* response) {
  Result<std::shared_ptr<Model>> found = repository_->GetModel(request.name(), request.version());
  if (!found.ok()) return ToGrpcStatus(found.status());
  *response->mutable_config() = found.value()->config();
  return grpc::Status::OK;
}

grpc::Status GrpcServiceCore::ModelStatistics(const inference::ModelStatisticsRequest& request,
                                              inference::ModelStatisticsResponse* response) {
  Result<std::vector<common::ModelStatisticsSnapshot>> stats =
      common::SnapshotStatistics(*repository_, request.name(), request.version());
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  for (const common::ModelStatisticsSnapshot& model : *stats) {
    FillStatistics(model, response->add_model_stats());
  }
  return grpc::Status::OK;
}

grpc::Status GrpcServiceCore::RepositoryIndex(const inference::RepositoryIndexRequest& request,
                                              inference::RepositoryIndexResponse* response) {
  for (const ModelIndexEntry& entry : repository_->Index()) {
    if (request.ready() && entry.state != ModelState::kReady) continue;
    auto* model = response->add_models();
    model->set_name(entry.name);
    model->set_version(entry.version);
    model->set_state(ModelStateName(entry.state));
    model->set_reason(entry.reason);
  }
  return grpc::Status::OK;
}

}  // namespace grpcfe

// ---- GrpcServer -----------------------------------------------------------------------

class GrpcServer::Impl {
 public:
  Impl(GrpcServerOptions options, ModelRepository* repository, std::shared_ptr<grpc::ServerCredentials> credentials)
      : core_(std::move(options), repository),
        credentials_(std::move(credentials)),
        limit_(std::make_shared<grpcfe::ConnectionLimit>(core_.options().max_connections, &core_.connections())) {}

  ~Impl() {
    Stop(std::chrono::milliseconds(0));
  }

  Status Start() {
    std::lock_guard lock(lifecycle_mu_);
    if (server_) return Internal("gRPC server already started");
    const GrpcServerOptions& options = core_.options();
    const bool ipv6 = options.address.find(':') != std::string::npos && options.address.front() != '[';
    const std::string endpoint =
        (ipv6 ? "[" + options.address + "]" : options.address) + ":" + std::to_string(options.port);

    // gRPC's locks are absl::Mutex. Debian's abseil is built without NDEBUG,
    // which leaves its deadlock detection on: every lock then updates one
    // process-wide lock graph (GraphCycles, under a global lock) and records
    // a stack trace. Upstream release builds leave it off; so does ortserve
    // (docs/decisions.md, "abseil deadlock detection off for gRPC").
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    grpc::ServerBuilder builder;
    int bound_port = 0;
    // Plaintext: ortserve's own accept loop (GrpcAcceptor.h says why); TLS:
    // gRPC's, limited through its socket mutator (TlsConnectionGate.h) and
    // watched through its log (GrpcLogBridge.h).
    grpcfe::RouteGrpcLogs(tls());
    if (!tls()) {
      auto acceptor = grpcfe::GrpcAcceptor::Listen(options.address, options.port, limit_.get());
      if (!acceptor.ok()) return acceptor.status();
      acceptor_ = std::move(acceptor).value();
      bound_port = acceptor_->port();
    } else {
      if (auto gate = grpcfe::TlsConnectionGate(limit_)) {
        builder.SetOption(std::move(gate));
      } else {
        spdlog::warn("gRPC {}: --grpc-max-connections does not apply to the TLS port (ortserve mirrors the socket "
                     "mutator of gRPC 1.51 only, src/server/grpc/GrpcSocketMutatorAbi.h)",
                     GRPC_CPP_VERSION_STRING);
      }
      builder.AddListeningPort(endpoint, credentials_, &bound_port);
    }
    // The TLS handshake and the HTTP/2 settings exchange (gRPC's acceptor
    // only: a descriptor handed over has none, GrpcAcceptor.h).
    builder.AddChannelArgument(
        GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
        static_cast<int>(std::chrono::milliseconds(grpcfe::kHandshakeTimeout).count()));
    // Without this a second server on the same port would bind "successfully".
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_message_bytes));
    builder.SetMaxSendMessageSize(static_cast<int>(options.max_message_bytes));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
    quota_.Resize(options.max_buffered_bytes);
    builder.SetResourceQuota(quota_);
    builder.RegisterService(&core_.service());
    builder.RegisterAsyncGenericService(&core_.generic_service());
    for (int i = 0; i < options.completion_queue_threads; ++i) queues_.push_back(builder.AddCompletionQueue());
    server_ = builder.BuildAndStart();
    if (!server_ || bound_port == 0) {
      server_.reset();
      acceptor_.reset();
      ShutdownQueues();
      return Unavailable("gRPC server could not listen on " + endpoint +
                         " (address in use or not available on this host)");
    }
    port_ = static_cast<uint16_t>(bound_port);
    for (size_t i = 0; i < queues_.size(); ++i) {
      grpcfe::StartListening(&core_, queues_[i].get());
      threads_.emplace_back([this, i] {
        SetCurrentThreadName("grpc-cq-" + std::to_string(i));
        grpcfe::PollQueue(queues_[i].get());
      });
    }
    if (acceptor_) acceptor_->Start(server_.get());
    spdlog::info(
        "gRPC server listening on {} ({} completion-queue threads, {} byte message limit, {} streams per "
        "connection, {} bytes buffered at most)",
        endpoint.substr(0, endpoint.rfind(':')) + ":" + std::to_string(port_), options.completion_queue_threads,
        options.max_message_bytes, options.max_concurrent_streams, options.max_buffered_bytes);
    return Status::Ok();
  }

  uint16_t port() const { return port_; }
  size_t active_calls() const { return core_.active_calls(); }
  bool tls() const {
    const GrpcServerOptions& options = core_.options();
    return options.tls.enabled || options.tls.mutual;
  }
  size_t open_connections() { return limit_->Open(); }
  uint64_t rejected_connections() const { return limit_->Refused(); }

  void StopAccepting() { core_.SetStopping(); }
  void MarkNotReady() { core_.SetNotReady(); }

  void Stop(std::chrono::milliseconds drain) {
    std::lock_guard lock(lifecycle_mu_);
    if (!server_ || stopped_) return;
    stopped_ = true;
    core_.SetStopping();
    // New requests are refused from here on (stopping). Wait until the ones
    // inside models have completed, up to the drain deadline; then shut down
    // with a short grace for their responses to be written. Calls still open
    // after that (idle streams, or requests past the deadline) are cancelled,
    // and their requests see the cancel flag. Returns once every call object
    // has let go of its gRPC call.
    // An idle stream holds no request, so only requests are waited for, not
    // calls.
    if (acceptor_) acceptor_->Stop();  // new connections wait in the backlog, then are refused
    const auto deadline = std::chrono::steady_clock::now() + drain;
    if (!core_.admission().in_flight().WaitForZeroUntil(deadline))
      spdlog::warn("gRPC server stopping: drain time over, cancelling requests still running");
    constexpr auto kWriteGrace = std::chrono::milliseconds(500);
    const auto left = std::max(deadline - std::chrono::steady_clock::now(),
                               std::chrono::steady_clock::duration::zero());
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::min<std::chrono::steady_clock::duration>(left, kWriteGrace));
    core_.WaitForNoCalls();
    // Every call waited for its requests' answers, but the last completion
    // may still be leaving the admission's counter, which dies with core_.
    core_.admission().in_flight().WaitForZero();
    ShutdownQueues();
    spdlog::info("gRPC server stopped");
  }

 private:
  void ShutdownQueues() {
    for (auto& queue : queues_) queue->Shutdown();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    // Drain queues that had no thread (a failed Start).
    void* tag = nullptr;
    bool ok = false;
    for (auto& queue : queues_) {
      while (queue->Next(&tag, &ok)) {
      }
    }
  }

  grpcfe::GrpcServiceCore core_;
  const std::shared_ptr<grpc::ServerCredentials> credentials_;
  // Shared with gRPC's socket mutator on a TLS port, which may outlive the
  // server object; it accepts nothing once the server is shut down, so the
  // connections it points to (core_'s) are not used after.
  const std::shared_ptr<grpcfe::ConnectionLimit> limit_;
  grpc::ResourceQuota quota_{"ortserve-grpc"};
  std::mutex lifecycle_mu_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpcfe::GrpcAcceptor> acceptor_;  // null: gRPC's own acceptor
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  bool stopped_ = false;
};

namespace {

// Reads and checks the PEM files up front: gRPC itself would only log a
// failed handshake setup and leave the port unbound, with no file named.
Result<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(const GrpcServerOptions::Tls& tls) {
  auto cert = auth::ReadPemFile(tls.server_cert_file, auth::PemKind::kCertificate, "--grpc-server-cert");
  if (!cert.ok()) return cert.status();
  auto key = auth::ReadPemFile(tls.server_key_file, auth::PemKind::kPrivateKey, "--grpc-server-key");
  if (!key.ok()) return key.status();
  if (!auth::PemKeyMatchesCertificate(*cert, *key)) {
    return InvalidArgument("--grpc-server-key file '" + tls.server_key_file +
                           "' does not match the certificate in --grpc-server-cert file '" + tls.server_cert_file + "'");
  }
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (tls.mutual && tls.root_cert_file.empty()) {
    return InvalidArgument("--grpc-use-ssl-mutual needs --grpc-root-cert (the CA that signs client certificates)");
  }
  if (!tls.root_cert_file.empty()) {
    auto root = auth::ReadPemFile(tls.root_cert_file, auth::PemKind::kCertificate, "--grpc-root-cert");
    if (!root.ok()) return root.status();
    ssl.pem_root_certs = std::move(root).value();
  }
  if (tls.mutual) ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  ssl.pem_key_cert_pairs.push_back({std::move(key).value(), std::move(cert).value()});
  return grpc::SslServerCredentials(ssl);
}

}  // namespace

Result<std::unique_ptr<GrpcServer>> GrpcServer::Create(GrpcServerOptions options,
                                                       ModelRepository* repository) {
  if (repository == nullptr) return InvalidArgument("gRPC server needs a model repository");
  if (options.address.empty()) return InvalidArgument("gRPC address must not be empty");
  if (options.completion_queue_threads < 1 || options.completion_queue_threads > 64) {
    return InvalidArgument("gRPC completion_queue_threads must be within [1, 64], got " +
                           std::to_string(options.completion_queue_threads));
  }
  if (options.max_tensor_elements == 0) return InvalidArgument("gRPC max_tensor_elements must be positive");
  constexpr size_t kMinMessage = 4096;
  constexpr size_t kMaxMessage = static_cast<size_t>(std::numeric_limits<int32_t>::max());
  if (options.max_message_bytes < kMinMessage || options.max_message_bytes > kMaxMessage) {
    return InvalidArgument("gRPC max_message_bytes must be within [" + std::to_string(kMinMessage) + ", " +
                           std::to_string(kMaxMessage) + "], got " + std::to_string(options.max_message_bytes));
  }
  if (options.max_concurrent_streams < 1) {
    return InvalidArgument("--grpc-max-concurrent-streams must be at least 1, got " +
                           std::to_string(options.max_concurrent_streams));
  }
  if (options.max_connections < 1) return InvalidArgument("--grpc-max-connections must be at least 1, got 0");
  if (options.max_buffered_bytes < options.max_message_bytes) {
    return InvalidArgument("--grpc-max-buffered-bytes (" + std::to_string(options.max_buffered_bytes) +
                           ") must be at least --grpc-max-message-size (" +
                           std::to_string(options.max_message_bytes) + "): a message that large could never arrive");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls.enabled || options.tls.mutual) {
    auto tls = TlsCredentials(options.tls);
    if (!tls.ok()) return tls.status();
    credentials = std::move(tls).value();
  }
  return std::unique_ptr<GrpcServer>(
      new GrpcServer(std::make_unique<Impl>(std::move(options), repository, std::move(credentials))));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcServer::~GrpcServer() = default;
Status GrpcServer::Start() { return impl_->Start(); }
uint16_t GrpcServer::port() const { return impl_->port(); }
void GrpcServer::StopAccepting() { impl_->StopAccepting(); }
void GrpcServer::MarkNotReady() { impl_->MarkNotReady(); }
void GrpcServer::Stop(std::chrono::milliseconds drain) { impl_->Stop(drain); }
size_t GrpcServer::ActiveCalls() const { return impl_->active_calls(); }
size_t GrpcServer::OpenConnections() const { return impl_->open_connections(); }
uint64_t GrpcServer::RejectedConnections() const { return impl_->rejected_connections(); }

}  // namespace ortserve
