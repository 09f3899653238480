// The gRPC front end's service methods other than inference (health,
// metadata, config, statistics, index, unimplemented extensions) and its
// options, against a fake repository through a real channel.
#include <gtest/gtest.h>

#include <algorithm>

#include <absl/synchronization/mutex.h>

#include "GrpcServerFixture.h"
#include "server/common/StatisticsSnapshot.h"

namespace ortserve {
namespace {

using namespace grpc_test;

TEST_F(GrpcServerTest, LivenessAndReadinessFollowTheRepository) {
  grpc::ClientContext live_ctx;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&live_ctx, {}, &live).ok());
  EXPECT_TRUE(live.live());

  grpc::ClientContext ready_ctx;
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(&ready_ctx, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());

  repository_.all_ready = false;  // strict readiness: one model not ready
  grpc::ClientContext not_ready_ctx;
  ASSERT_TRUE(stub_->ServerReady(&not_ready_ctx, {}, &ready).ok());
  EXPECT_FALSE(ready.ready());

  inference::ModelReadyRequest model_request;
  model_request.set_name("add_one");
  inference::ModelReadyResponse model_ready;
  grpc::ClientContext model_ctx;
  ASSERT_TRUE(stub_->ModelReady(&model_ctx, model_request, &model_ready).ok());
  EXPECT_TRUE(model_ready.ready());
  // As Triton: another version of a model it knows is not ready (OK); a
  // model it does not know is an error, not "not ready".
  model_request.set_version("2");
  grpc::ClientContext other_version_ctx;
  ASSERT_TRUE(stub_->ModelReady(&other_version_ctx, model_request, &model_ready).ok());
  EXPECT_FALSE(model_ready.ready());
  model_request.set_name("nope");
  grpc::ClientContext unknown_ctx;
  const grpc::Status unknown = stub_->ModelReady(&unknown_ctx, model_request, &model_ready);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_message(), "Request for unknown model: 'nope' is not found");
}

TEST_F(GrpcServerTest, HealthCheckIsServingOnlyWhenReady) {
  uint64_t status = 0;
  ASSERT_TRUE(HealthCheck("", &status).ok());
  EXPECT_EQ(status, 1u);  // SERVING
  ASSERT_TRUE(HealthCheck("inference.GRPCInferenceService", &status).ok());
  EXPECT_EQ(status, 1u);
  repository_.all_ready = false;
  ASSERT_TRUE(HealthCheck("", &status).ok());
  EXPECT_EQ(status, 2u);  // NOT_SERVING
  EXPECT_EQ(HealthCheck("some.Other", &status).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcServerTest, ServerMetadata) {
  grpc::ClientContext ctx;
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(stub_->ServerMetadata(&ctx, {}, &metadata).ok());
  EXPECT_EQ(metadata.name(), "ortserve");
  EXPECT_EQ(metadata.version(), "9.9.9");
  EXPECT_NE(std::find(metadata.extensions().begin(), metadata.extensions().end(), "statistics"),
            metadata.extensions().end());
}

TEST_F(GrpcServerTest, ModelMetadataPrependsTheBatchDimension) {
  inference::ModelMetadataRequest request;
  request.set_name("batched");
  inference::ModelMetadataResponse metadata;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ModelMetadata(&ctx, request, &metadata).ok());
  EXPECT_EQ(metadata.name(), "batched");
  EXPECT_EQ(metadata.platform(), "onnxruntime_onnx");
  ASSERT_EQ(metadata.versions_size(), 1);
  EXPECT_EQ(metadata.versions(0), "1");
  ASSERT_EQ(metadata.inputs_size(), 1);
  EXPECT_EQ(metadata.inputs(0).name(), "INPUT0");
  EXPECT_EQ(metadata.inputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<int64_t>(metadata.inputs(0).shape().begin(), metadata.inputs(0).shape().end()),
            (std::vector<int64_t>{-1, 4}));
  ASSERT_EQ(metadata.outputs_size(), 1);
  EXPECT_EQ(metadata.outputs(0).datatype(), "BYTES");

  request.set_name("add_one");  // max_batch_size 0: shapes as configured
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub_->ModelMetadata(&ctx2, request, &metadata).ok());
  EXPECT_EQ(std::vector<int64_t>(metadata.inputs(0).shape().begin(), metadata.inputs(0).shape().end()),
            (std::vector<int64_t>{4}));

  request.set_name("missing");
  grpc::ClientContext ctx3;
  grpc::Status status = stub_->ModelMetadata(&ctx3, request, &metadata);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Request for unknown model: 'missing' is not found");
}

TEST_F(GrpcServerTest, ModelConfigIsTheConfigProto) {
  inference::ModelConfigRequest request;
  request.set_name("batched");
  inference::ModelConfigResponse response;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ModelConfig(&ctx, request, &response).ok());
  EXPECT_EQ(response.config().SerializeAsString(), batched_->config().SerializeAsString());
}

TEST_F(GrpcServerTest, StatisticsReportTheCountersAndExecutedBatchSizesOnly) {
  ModelStatistics& stats = batched_->stats();
  stats.inference_count = 12;
  stats.execution_count = 3;
  stats.last_inference_ms = 1234;
  stats.success.Add(500, 3);
  stats.queue.Add(50, 3);
  // The scheduler adds to all three compute counters of a batch size.
  stats.ForBatchSize(4)->compute_infer.Add(300, 2);
  stats.ForBatchSize(4)->compute_input.Add(30, 2);
  stats.ForBatchSize(4)->compute_output.Add(20, 2);

  inference::ModelStatisticsRequest request;
  request.set_name("batched");
  inference::ModelStatisticsResponse response;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ModelStatistics(&ctx, request, &response).ok());
  ASSERT_EQ(response.model_stats_size(), 1);
  const inference::ModelStatistics& s = response.model_stats(0);
  EXPECT_EQ(s.name(), "batched");
  EXPECT_EQ(s.version(), "1");
  EXPECT_EQ(s.inference_count(), 12u);
  EXPECT_EQ(s.execution_count(), 3u);
  EXPECT_EQ(s.last_inference(), 1234u);
  EXPECT_EQ(s.inference_stats().success().count(), 3u);
  EXPECT_EQ(s.inference_stats().success().ns(), 500u);
  EXPECT_EQ(s.inference_stats().queue().ns(), 50u);
  ASSERT_EQ(s.batch_stats_size(), 1);
  EXPECT_EQ(s.batch_stats(0).batch_size(), 4u);
  EXPECT_EQ(s.batch_stats(0).compute_infer().count(), 2u);
  EXPECT_EQ(s.batch_stats(0).compute_input().ns(), 30u);

  grpc::ClientContext all_ctx;
  ASSERT_TRUE(stub_->ModelStatistics(&all_ctx, {}, &response).ok());
  EXPECT_EQ(response.model_stats_size(), 3);
}

TEST_F(GrpcServerTest, RepositoryIndexListsStatesAndFiltersReady) {
  inference::RepositoryIndexRequest request;
  inference::RepositoryIndexResponse index;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->RepositoryIndex(&ctx, request, &index).ok());
  ASSERT_EQ(index.models_size(), 4);
  bool saw_broken = false;
  for (const auto& model : index.models()) {
    if (model.name() == "broken") {
      saw_broken = true;
      EXPECT_EQ(model.state(), "UNAVAILABLE");
      EXPECT_NE(model.reason().find("not a valid"), std::string::npos);
    }
  }
  EXPECT_TRUE(saw_broken);
  request.set_ready(true);
  grpc::ClientContext ready_ctx;
  ASSERT_TRUE(stub_->RepositoryIndex(&ready_ctx, request, &index).ok());
  EXPECT_EQ(index.models_size(), 3);
}

TEST_F(GrpcServerTest, SharedMemoryWithoutClientShmAndLaterExtensions) {
  // Status answers (no region); registration is refused without
  // --allow-client-shm, naming the flag; CUDA shared memory as Triton without GPUs.
  grpc::ClientContext ctx;
  inference::SystemSharedMemoryStatusResponse response;
  ASSERT_TRUE(stub_->SystemSharedMemoryStatus(&ctx, {}, &response).ok());
  EXPECT_EQ(response.regions_size(), 0);
  grpc::ClientContext register_ctx;
  inference::SystemSharedMemoryRegisterRequest register_request;
  register_request.set_name("r");
  register_request.set_key("/r");
  register_request.set_byte_size(64);
  inference::SystemSharedMemoryRegisterResponse registered;
  grpc::Status refused = stub_->SystemSharedMemoryRegister(&register_ctx, register_request, &registered);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(refused.error_message().find("--allow-client-shm=true"), std::string::npos);

  grpc::ClientContext cuda_ctx;
  inference::CudaSharedMemoryRegisterResponse cuda;
  const grpc::Status cuda_refused = stub_->CudaSharedMemoryRegister(&cuda_ctx, {}, &cuda);
  EXPECT_EQ(cuda_refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Triton's words for a handle it cannot open (L0_grpc matches them).
  EXPECT_EQ(cuda_refused.error_message().rfind("failed to register shared memory region: invalid args", 0), 0u);


  grpc::ClientContext load_ctx;
  inference::RepositoryModelLoadResponse load;
  // Implemented, but refused outside model control mode explicit (as Triton).
  grpc::Status load_status = stub_->RepositoryModelLoad(&load_ctx, {}, &load);
  EXPECT_EQ(load_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(load_status.error_message().find("explicit model load / unload is not allowed"), std::string::npos);

  inference::ModelInferRequest shm = AddOneRequest("add_one", "x");
  shm.clear_raw_input_contents();
  (*shm.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("r");
  (*shm.mutable_inputs(0)->mutable_parameters())["shared_memory_byte_size"].set_int64_param(4);
  inference::ModelInferResponse infer;
  grpc::Status unknown_region = Infer(shm, &infer);
  EXPECT_EQ(unknown_region.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown_region.error_message().find("Unable to find shared memory region: 'r'"), std::string::npos);
}

// gRPC's locks are absl::Mutex; the distribution's abseil, built without
// NDEBUG, checks every lock against a process-wide lock graph and aborts on a
// cycle. A started server turns that off (GrpcServer.cpp says why), so two
// locks taken in both orders by one thread, a cycle but no deadlock, pass.
TEST_F(GrpcServerTest, AbseilDeadlockDetectionIsOffOnceStarted) {
  absl::Mutex a;
  absl::Mutex b;
  {
    absl::MutexLock first(&a);
    absl::MutexLock second(&b);
  }
  {
    absl::MutexLock first(&b);
    absl::MutexLock second(&a);  // aborts here while detection is on
  }
  grpc::ClientContext ctx;
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub_->ServerLive(&ctx, {}, &live).ok());
}

TEST(GrpcServerOptionsTest, CreateRejectsBadOptions) {
  FakeRepository repository;
  GrpcServerOptions options;
  options.completion_queue_threads = 0;
  Result<std::unique_ptr<GrpcServer>> server = GrpcServer::Create(options, &repository);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("completion_queue_threads"), std::string::npos);
  EXPECT_FALSE(GrpcServer::Create(GrpcServerOptions{}, nullptr).ok());
}

TEST(GrpcServerOptionsTest, TheMemoryQuotaHoldsOneMessageAtLeast) {
  FakeRepository repository;
  GrpcServerOptions options;
  options.max_message_bytes = 64u << 20;
  options.max_buffered_bytes = 32u << 20;
  Result<std::unique_ptr<GrpcServer>> server = GrpcServer::Create(options, &repository);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("--grpc-max-buffered-bytes"), std::string::npos);
  EXPECT_NE(server.status().message().find("--grpc-max-message-size"), std::string::npos);
  options.max_buffered_bytes = options.max_message_bytes;
  EXPECT_TRUE(GrpcServer::Create(options, &repository).ok());
  options.max_concurrent_streams = 0;
  EXPECT_FALSE(GrpcServer::Create(options, &repository).ok());
}

TEST(GrpcServerOptionsTest, APortInUseFailsToStart) {
  FakeRepository repository;
  GrpcServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  auto first = GrpcServer::Create(options, &repository);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first.value()->Start().ok());
  options.port = first.value()->port();
  auto second = GrpcServer::Create(options, &repository);
  ASSERT_TRUE(second.ok());
  Status started = second.value()->Start();
  EXPECT_EQ(started.code(), StatusCode::kUnavailable);
  first.value()->Stop(std::chrono::seconds(1));
}

TEST(GrpcServerOptionsTest, MessagesOverTheLimitAreRejected) {
  FakeRepository repository;
  repository.Add(AddOneModel("add_one", 0));
  GrpcServerOptions options;
  options.address = "127.0.0.1";
  options.port = 0;
  options.max_message_bytes = 64 * 1024;
  auto server = GrpcServer::Create(options, &repository);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.value()->Start().ok());
  auto stub = GRPCInferenceService::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server.value()->port()), grpc::InsecureChannelCredentials()));
  inference::ModelInferRequest request;
  request.set_model_name("add_one");
  auto* input = request.add_inputs();
  input->set_name("big");
  input->set_datatype("UINT8");
  input->add_shape(100 * 1024);
  request.add_raw_input_contents(std::string(100 * 1024, 'x'));
  inference::ModelInferResponse response;
  grpc::ClientContext ctx;
  EXPECT_EQ(stub->ModelInfer(&ctx, request, &response).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  server.value()->Stop(std::chrono::seconds(1));
}

// ---- the codec, without a network ----------------------------------------------------

TEST(GrpcStatisticsFields, EveryDurationNameIsAStatisticDurationField) {
  auto expect_durations = [](const google::protobuf::Descriptor* message, const auto& names) {
    for (std::string_view name : names) {
      const google::protobuf::FieldDescriptor* field = message->FindFieldByName(std::string(name));
      ASSERT_NE(field, nullptr) << message->name() << "." << name;
      EXPECT_EQ(field->message_type(), inference::StatisticDuration::descriptor()) << name;
    }
  };
  expect_durations(inference::InferStatistics::descriptor(), common::kInferenceDurationNames);
  expect_durations(inference::InferBatchStatistics::descriptor(), common::kBatchDurationNames);
}

}  // namespace
}  // namespace ortserve
