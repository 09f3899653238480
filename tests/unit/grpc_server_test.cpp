// The gRPC front end against a fake repository, called through a real channel
// and the generated stub on a free port. The fake models answer from their own
// threads, as the scheduler does.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "grpc_service.grpc.pb.h"
#include "repository/ModelRepository.h"
#include "server/common/StatisticsSnapshot.h"
#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcServer.h"

namespace ortserve {
namespace {

using inference::GRPCInferenceService;

// Answers every request from a thread of its own. Each input becomes an output
// "OUT_<input name>" of the same type and shape: FP32, INT8, INT32 and INT64
// elements plus one, everything else echoed. With `gated`, requests wait until
// the test releases them.
class FakeModel : public Model {
 public:
  FakeModel(std::string name, inference::ModelConfig config, bool gated = false)
      : name_(std::move(name)), config_(std::move(config)), stats_(4), gated_(gated) {}
  ~FakeModel() override {
    std::lock_guard lock(mu_);
    for (std::thread& t : threads_) t.join();
  }

  const std::string& name() const override { return name_; }
  const std::string& version() const override { return version_; }
  const inference::ModelConfig& config() const override { return config_; }
  ModelStatistics& stats() override { return stats_; }
  bool ready() const override { return true; }
  size_t QueueDepth() const override { return 0; }

  void Infer(std::unique_ptr<InferenceRequest> request) override {
    std::lock_guard lock(mu_);
    last_timeout_us_ = request->timeout_us;
    last_priority_ = request->priority;
    last_cancel_flag_ = request->cancelled;
    if (request->inputs.empty()) {
      // Synchronous rejection, as validation does.
      request->on_complete(InvalidArgument("model '" + name_ + "' needs at least one input"));
      return;
    }
    if (gated_) {
      held_.push_back(std::move(request));
      cv_.notify_all();
      return;
    }
    Run(std::move(request));
  }

  // Gated models: wait until `count` requests are held.
  void WaitForHeld(size_t count) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return held_.size() >= count; });
  }
  // Gated models: answer the held request with this id.
  void Release(const std::string& id) {
    std::lock_guard lock(mu_);
    for (auto it = held_.begin(); it != held_.end(); ++it) {
      if ((*it)->id == id) {
        std::unique_ptr<InferenceRequest> request = std::move(*it);
        held_.erase(it);
        Run(std::move(request));
        return;
      }
    }
    ADD_FAILURE() << "no held request " << id;
  }
  CancelFlag LastCancelFlag() {
    std::lock_guard lock(mu_);
    return last_cancel_flag_;
  }
  uint64_t last_timeout_us() {
    std::lock_guard lock(mu_);
    return last_timeout_us_;
  }
  uint32_t last_priority() {
    std::lock_guard lock(mu_);
    return last_priority_;
  }

 private:
  // Called with mu_ held.
  void Run(std::unique_ptr<InferenceRequest> request) {
    threads_.emplace_back([this, request = std::move(request)]() mutable {
      InferenceResponse response;
      response.model_name = name_;
      response.model_version = version_;
      response.id = request->id;
      for (const Tensor& input : request->inputs) {
        std::vector<std::byte> bytes(input.data.data(), input.data.data() + input.data.size());
        AddOne(input.dtype, &bytes);
        response.outputs.push_back(Tensor{"OUT_" + input.name, input.dtype, input.shape,
                                          TensorData::FromVector(std::move(bytes))});
        response.requested.push_back(RequestedOutput{"OUT_" + input.name, true});
      }
      request->on_complete(std::move(response));
    });
  }

  template <typename T>
  static void AddOneAs(std::vector<std::byte>* bytes) {
    for (size_t offset = 0; offset + sizeof(T) <= bytes->size(); offset += sizeof(T)) {
      T value;
      std::memcpy(&value, bytes->data() + offset, sizeof(T));
      value = static_cast<T>(value + 1);
      std::memcpy(bytes->data() + offset, &value, sizeof(T));
    }
  }
  static void AddOne(DataType dtype, std::vector<std::byte>* bytes) {
    switch (dtype) {
      case DataType::kFp32: return AddOneAs<float>(bytes);
      case DataType::kInt8: return AddOneAs<int8_t>(bytes);
      case DataType::kInt32: return AddOneAs<int32_t>(bytes);
      case DataType::kInt64: return AddOneAs<int64_t>(bytes);
      default: return;
    }
  }

  const std::string name_;
  const std::string version_ = "1";
  const inference::ModelConfig config_;
  ModelStatistics stats_;
  const bool gated_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
  std::deque<std::unique_ptr<InferenceRequest>> held_;
  uint64_t last_timeout_us_ = 0;
  uint32_t last_priority_ = 0;
  CancelFlag last_cancel_flag_;
};

class FakeRepository : public ModelRepository {
 public:
  void Add(std::shared_ptr<FakeModel> model) { models_[model->name()] = std::move(model); }
  void LoadAll() override {}
  void Shutdown(Clock::time_point) override {}
  Result<std::shared_ptr<Model>> GetModel(const std::string& name, const std::string& version) const override {
    auto it = models_.find(name);
    if (it == models_.end() || (!version.empty() && version != it->second->version())) {
      return NotFound("unknown model '" + name + "' version '" + version + "'");
    }
    return std::shared_ptr<Model>(it->second);
  }
  std::vector<ModelIndexEntry> Index() const override {
    std::vector<ModelIndexEntry> index;
    for (const auto& [name, model] : models_) index.push_back({name, model->version(), ModelState::kReady, ""});
    index.push_back({"broken", "1", ModelState::kUnavailable, "model.onnx is not a valid ONNX file"});
    return index;
  }
  std::vector<std::shared_ptr<Model>> ReadyModels() const override {
    std::vector<std::shared_ptr<Model>> ready;
    for (const auto& entry : models_) ready.push_back(entry.second);
    return ready;
  }
  bool AllModelsReady() const override { return all_ready.load(); }

  std::atomic<bool> all_ready{true};

 private:
  std::map<std::string, std::shared_ptr<FakeModel>> models_;
};

inference::ModelConfig MakeConfig(const std::string& name, int max_batch_size) {
  inference::ModelConfig config;
  config.set_name(name);
  config.set_platform("onnxruntime_onnx");
  config.set_max_batch_size(max_batch_size);
  auto* input = config.add_input();
  input->set_name("INPUT0");
  input->set_data_type(inference::TYPE_FP32);
  input->add_dims(4);
  auto* output = config.add_output();
  output->set_name("OUT_INPUT0");
  output->set_data_type(inference::TYPE_STRING);
  output->add_dims(-1);
  return config;
}

template <typename T>
std::string RawBytes(std::initializer_list<T> values) {
  std::string raw(values.size() * sizeof(T), '\0');
  std::memcpy(raw.data(), std::data(values), raw.size());
  return raw;
}

template <typename T>
std::vector<T> FromRaw(const std::string& raw) {
  std::vector<T> values(raw.size() / sizeof(T));
  std::memcpy(values.data(), raw.data(), values.size() * sizeof(T));
  return values;
}

template <typename T>
void Fill(google::protobuf::RepeatedField<T>* field, std::type_identity_t<std::initializer_list<T>> values) {
  field->Add(values.begin(), values.end());
}

std::string LengthPrefixed(std::initializer_list<std::string> elements) {
  std::string out;
  for (const std::string& element : elements) {
    const uint32_t length = static_cast<uint32_t>(element.size());
    out.append(reinterpret_cast<const char*>(&length), 4);
    out += element;
  }
  return out;
}

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(GrpcServerOptions{}); }
  void TearDown() override {
    if (server_) server_->Stop(std::chrono::seconds(5));
  }

  void StartServer(GrpcServerOptions options) {
    add_one_ = std::make_shared<FakeModel>("add_one", MakeConfig("add_one", 0));
    batched_ = std::make_shared<FakeModel>("batched", MakeConfig("batched", 8));
    gated_ = std::make_shared<FakeModel>("gated", MakeConfig("gated", 0), /*gated=*/true);
    repository_.Add(add_one_);
    repository_.Add(batched_);
    repository_.Add(gated_);
    options.address = "127.0.0.1";
    options.port = 0;
    options.server_version = "9.9.9";
    Result<std::unique_ptr<GrpcServer>> server = GrpcServer::Create(options, &repository_);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_NE(server_->port(), 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = GRPCInferenceService::NewStub(channel_);
  }

  static inference::ModelInferRequest AddOneRequest(const std::string& model, const std::string& id) {
    inference::ModelInferRequest request;
    request.set_model_name(model);
    request.set_id(id);
    auto* input = request.add_inputs();
    input->set_name("INPUT0");
    input->set_datatype("FP32");
    input->add_shape(4);
    request.add_raw_input_contents(RawBytes<float>({1.f, 2.f, 3.f, 4.f}));
    return request;
  }

  grpc::Status Infer(const inference::ModelInferRequest& request, inference::ModelInferResponse* response,
                     grpc_compression_algorithm compression = GRPC_COMPRESS_NONE) {
    grpc::ClientContext ctx;
    ctx.set_compression_algorithm(compression);
    return stub_->ModelInfer(&ctx, request, response);
  }

  // grpc.health.v1.Health/Check by hand: HealthCheckRequest {string service = 1}
  // has ModelReadyRequest's wire form, HealthCheckResponse {enum status = 1}
  // StatisticDuration's (count = status).
  grpc::Status HealthCheck(const std::string& service, uint64_t* serving_status) {
    grpc::ClientContext ctx;
    inference::ModelReadyRequest request;
    request.set_name(service);
    inference::StatisticDuration response;
    grpc::Status status = grpc::internal::BlockingUnaryCall(
        channel_.get(), grpc::internal::RpcMethod("/grpc.health.v1.Health/Check", grpc::internal::RpcMethod::NORMAL_RPC),
        &ctx, request, &response);
    *serving_status = response.count();
    return status;
  }

  FakeRepository repository_;
  std::shared_ptr<FakeModel> add_one_, batched_, gated_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

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
  model_request.set_name("nope");
  grpc::ClientContext unknown_ctx;
  ASSERT_TRUE(stub_->ModelReady(&unknown_ctx, model_request, &model_ready).ok());
  EXPECT_FALSE(model_ready.ready());
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
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("missing"), std::string::npos);
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

TEST_F(GrpcServerTest, InferWithRawContentsEchoesIdAndAddsOne) {
  inference::ModelInferRequest request = AddOneRequest("add_one", "request-17");
  auto* p = &(*request.mutable_parameters())["timeout"];
  p->set_int64_param(2500);
  (*request.mutable_parameters())["priority"].set_uint64_param(2);
  (*request.mutable_parameters())["binary_data_output"].set_bool_param(true);
  inference::ModelInferResponse response;
  grpc::Status status = Infer(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.id(), "request-17");
  EXPECT_EQ(response.model_name(), "add_one");
  EXPECT_EQ(response.model_version(), "1");
  ASSERT_EQ(response.outputs_size(), 1);
  EXPECT_EQ(response.outputs(0).name(), "OUT_INPUT0");
  EXPECT_EQ(response.outputs(0).datatype(), "FP32");
  EXPECT_EQ(response.outputs(0).shape_size(), 1);
  EXPECT_EQ(response.outputs(0).shape(0), 4);
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  EXPECT_EQ(FromRaw<float>(response.raw_output_contents(0)), (std::vector<float>{2.f, 3.f, 4.f, 5.f}));
  EXPECT_EQ(add_one_->last_timeout_us(), 2500u);
  EXPECT_EQ(add_one_->last_priority(), 2u);
}

TEST_F(GrpcServerTest, InferAcceptsGzipCompressedRequests) {
  inference::ModelInferResponse response;
  grpc::Status status = Infer(AddOneRequest("add_one", "gz"), &response, GRPC_COMPRESS_GZIP);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(FromRaw<float>(response.raw_output_contents(0)), (std::vector<float>{2.f, 3.f, 4.f, 5.f}));
  status = Infer(AddOneRequest("add_one", "deflate"), &response, GRPC_COMPRESS_DEFLATE);
  ASSERT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcServerTest, InferWithTypedContentsOfEveryKind) {
  inference::ModelInferRequest request;
  request.set_model_name("add_one");
  auto add = [&](const std::string& name, const std::string& datatype, int64_t count) {
    auto* input = request.add_inputs();
    input->set_name(name);
    input->set_datatype(datatype);
    input->add_shape(count);
    return input->mutable_contents();
  };
  Fill(add("f32", "FP32", 2)->mutable_fp32_contents(), {1.5f, -1.f});
  Fill(add("i8", "INT8", 3)->mutable_int_contents(), {-1, 5, 126});
  add("i32", "INT32", 1)->mutable_int_contents()->Add(41);
  Fill(add("i64", "INT64", 2)->mutable_int64_contents(), {int64_t{1} << 40, -7});
  Fill(add("u16", "UINT16", 2)->mutable_uint_contents(), {65535u, 7u});
  add("u64", "UINT64", 1)->mutable_uint64_contents()->Add(uint64_t{1} << 63);
  add("f64", "FP64", 1)->mutable_fp64_contents()->Add(0.25);
  Fill(add("b", "BOOL", 3)->mutable_bool_contents(), {true, false, true});
  auto* text = add("s", "BYTES", 3)->mutable_bytes_contents();
  *text->Add() = "hi";
  *text->Add() = "";
  *text->Add() = "world";

  inference::ModelInferResponse response;
  grpc::Status status = Infer(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 9);
  std::map<std::string, std::string> raw;
  for (int i = 0; i < response.outputs_size(); ++i) raw[response.outputs(i).name()] = response.raw_output_contents(i);
  EXPECT_EQ(FromRaw<float>(raw["OUT_f32"]), (std::vector<float>{2.5f, 0.f}));
  EXPECT_EQ(FromRaw<int8_t>(raw["OUT_i8"]), (std::vector<int8_t>{0, 6, 127}));
  EXPECT_EQ(FromRaw<int32_t>(raw["OUT_i32"]), (std::vector<int32_t>{42}));
  EXPECT_EQ(FromRaw<int64_t>(raw["OUT_i64"]), (std::vector<int64_t>{(int64_t{1} << 40) + 1, -6}));
  EXPECT_EQ(FromRaw<uint16_t>(raw["OUT_u16"]), (std::vector<uint16_t>{65535, 7}));
  EXPECT_EQ(FromRaw<uint64_t>(raw["OUT_u64"]), (std::vector<uint64_t>{uint64_t{1} << 63}));
  EXPECT_EQ(FromRaw<double>(raw["OUT_f64"]), (std::vector<double>{0.25}));
  EXPECT_EQ(FromRaw<uint8_t>(raw["OUT_b"]), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(raw["OUT_s"], LengthPrefixed({"hi", "", "world"}));
  EXPECT_EQ(response.outputs(8).datatype(), "BYTES");
}

TEST_F(GrpcServerTest, InferWithRawBytesTensor) {
  inference::ModelInferRequest request;
  request.set_model_name("add_one");
  auto* input = request.add_inputs();
  input->set_name("s");
  input->set_datatype("BYTES");
  input->add_shape(2);
  request.add_raw_input_contents(LengthPrefixed({"abc", "\x00\x01"}));
  inference::ModelInferResponse response;
  ASSERT_TRUE(Infer(request, &response).ok());
  EXPECT_EQ(response.raw_output_contents(0), LengthPrefixed({"abc", "\x00\x01"}));
}

TEST_F(GrpcServerTest, BadRequestsAreInvalidArgumentWithAMessage) {
  inference::ModelInferResponse response;
  grpc::Status status = Infer(AddOneRequest("no_such_model", "x"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("no_such_model"), std::string::npos);

  inference::ModelInferRequest two_raw = AddOneRequest("add_one", "x");
  two_raw.add_raw_input_contents("extra");
  status = Infer(two_raw, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("raw_input_contents"), std::string::npos);

  inference::ModelInferRequest bad_type = AddOneRequest("add_one", "x");
  bad_type.mutable_inputs(0)->set_datatype("FP33");
  status = Infer(bad_type, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("FP33"), std::string::npos);

  inference::ModelInferRequest typed;
  typed.set_model_name("add_one");
  auto* input = typed.add_inputs();
  input->set_name("i8");
  input->set_datatype("INT8");
  input->add_shape(2);
  Fill<int32_t>(input->mutable_contents()->mutable_int_contents(), {1, 300});
  status = Infer(typed, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("out of range"), std::string::npos);

  input->mutable_contents()->mutable_int_contents()->RemoveLast();  // 1 value for shape [2]
  status = Infer(typed, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("needs 2 elements"), std::string::npos);

  input->set_datatype("FP16");
  status = Infer(typed, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("raw_input_contents"), std::string::npos);

  // Rejected synchronously inside Model::Infer.
  inference::ModelInferRequest empty;
  empty.set_model_name("add_one");
  status = Infer(empty, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("at least one input"), std::string::npos);
}

TEST_F(GrpcServerTest, LaterExtensionsAreUnimplemented) {
  grpc::ClientContext ctx;
  inference::SystemSharedMemoryStatusResponse response;
  grpc::Status status = stub_->SystemSharedMemoryStatus(&ctx, {}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(status.error_message().find("SystemSharedMemoryStatusRequest"), std::string::npos);

  grpc::ClientContext cuda_ctx;
  inference::CudaSharedMemoryRegisterResponse cuda;
  EXPECT_EQ(stub_->CudaSharedMemoryRegister(&cuda_ctx, {}, &cuda).error_code(), grpc::StatusCode::UNIMPLEMENTED);

  grpc::ClientContext load_ctx;
  inference::RepositoryModelLoadResponse load;
  // Implemented, but refused outside model control mode explicit (as Triton).
  grpc::Status load_status = stub_->RepositoryModelLoad(&load_ctx, {}, &load);
  EXPECT_EQ(load_status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(load_status.error_message().find("explicit model load / unload is not allowed"), std::string::npos);

  inference::ModelInferRequest shm = AddOneRequest("add_one", "x");
  shm.clear_raw_input_contents();
  (*shm.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("r");
  inference::ModelInferResponse infer;
  EXPECT_EQ(Infer(shm, &infer).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(GrpcServerTest, StreamAnswersEveryRequestAndAnErrorDoesNotEndIt) {
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(AddOneRequest("add_one", "a")));
  ASSERT_TRUE(stream->Write(AddOneRequest("no_such_model", "b")));
  ASSERT_TRUE(stream->Write(AddOneRequest("add_one", "c")));
  ASSERT_TRUE(stream->WritesDone());

  std::map<std::string, inference::ModelStreamInferResponse> by_id;
  inference::ModelStreamInferResponse response;
  while (stream->Read(&response)) by_id[response.infer_response().id()] = response;
  grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();

  ASSERT_EQ(by_id.size(), 3u);
  for (const std::string id : {"a", "c"}) {
    EXPECT_EQ(by_id[id].error_message(), "") << id;
    ASSERT_EQ(by_id[id].infer_response().raw_output_contents_size(), 1);
    EXPECT_EQ(FromRaw<float>(by_id[id].infer_response().raw_output_contents(0)),
              (std::vector<float>{2.f, 3.f, 4.f, 5.f}));
  }
  EXPECT_NE(by_id["b"].error_message().find("no_such_model"), std::string::npos);
}

TEST_F(GrpcServerTest, StreamResponsesComeInCompletionOrder) {
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  ASSERT_TRUE(stream->Write(AddOneRequest("gated", "first")));
  ASSERT_TRUE(stream->Write(AddOneRequest("gated", "second")));
  gated_->WaitForHeld(2);
  gated_->Release("second");
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.infer_response().id(), "second");
  gated_->Release("first");
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.infer_response().id(), "first");
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(GrpcServerTest, CancelledStreamMarksItsRequestsCancelled) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  auto stream = stub_->ModelStreamInfer(ctx.get());
  ASSERT_TRUE(stream->Write(AddOneRequest("gated", "held")));
  gated_->WaitForHeld(1);
  CancelFlag flag = gated_->LastCancelFlag();
  ASSERT_TRUE(flag);
  EXPECT_FALSE(flag->IsCancelled());
  ctx->TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The server learns of the cancel asynchronously; wait for it without a deadline.
  while (!flag->IsCancelled()) std::this_thread::yield();
  gated_->Release("held");  // answered after the stream broke: dropped
}

TEST_F(GrpcServerTest, CancelledUnaryCallMarksItsRequestCancelled) {
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  grpc::Status status;
  std::atomic<bool> done{false};
  const inference::ModelInferRequest request = AddOneRequest("gated", "u");
  stub_->async()->ModelInfer(&ctx, &request, &response,
                             [&](grpc::Status s) {
                               status = s;
                               done = true;
                             });
  gated_->WaitForHeld(1);
  CancelFlag flag = gated_->LastCancelFlag();
  ctx.TryCancel();
  while (!flag->IsCancelled()) std::this_thread::yield();
  gated_->Release("u");
  while (!done) std::this_thread::yield();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
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
  repository.Add(std::make_shared<FakeModel>("add_one", MakeConfig("add_one", 0)));
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

TEST(GrpcInferCodecTest, RawInputsViewTheMessageWithoutCopying) {
  auto message = std::make_shared<inference::ModelInferRequest>();
  message->set_model_name("m");
  auto* input = message->add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  input->add_shape(2);
  message->add_raw_input_contents(RawBytes<float>({1.f, 2.f}));
  InferenceRequest request;
  ASSERT_TRUE(grpcfe::DecodeInferRequest(message, &request).ok());
  ASSERT_EQ(request.inputs.size(), 1u);
  EXPECT_EQ(static_cast<const void*>(request.inputs[0].data.data()),
            static_cast<const void*>(message->raw_input_contents(0).data()));
  EXPECT_EQ(request.inputs[0].data.owner().get(), static_cast<const void*>(message.get()));
}

TEST(GrpcInferCodecTest, ElementLimitIsCheckedFromTheShapeForRawAndTypedContents) {
  for (const bool raw : {true, false}) {
    auto message = std::make_shared<inference::ModelInferRequest>();
    message->set_model_name("m");
    auto* input = message->add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    input->add_shape(1);
    input->add_shape(3);
    if (raw) {
      message->add_raw_input_contents(RawBytes<float>({1.f, 2.f, 3.f}));
    } else {
      for (float v : {1.f, 2.f, 3.f}) input->mutable_contents()->add_fp32_contents(v);
    }
    InferenceRequest request;
    EXPECT_TRUE(grpcfe::DecodeInferRequest(message, &request, 3).ok());
    const Status over = grpcfe::DecodeInferRequest(message, &request, 2);
    EXPECT_EQ(grpcfe::ToGrpcCode(over.code()), grpc::StatusCode::RESOURCE_EXHAUSTED) << raw;
    EXPECT_NE(over.message().find("input 'x': shape [1,3] has 3 elements, over the limit of 2"), std::string::npos)
        << over.message();
  }
}

TEST(GrpcInferCodecTest, StatusCodesMapInOnePlace) {
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kNotFound), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kUnavailable), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kUnsupported), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kInternal), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(grpcfe::ToGrpcStatus(Unavailable("queue full")).error_message(), "queue full");
}

// The statistics handler sets durations by these names (the HTTP front end
// writes them as JSON keys): each must be a StatisticDuration of the proto.
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
