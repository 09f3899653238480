#pragma once
// What the gRPC front end's tests share: a GrpcServer on a free loopback port
// over a FakeRepository of three models (add_one, batched and the held
// "gated"), a stub on a real channel, and helpers to build and read tensors.
// The models add one to every element and answer from their own threads, as
// the scheduler does.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "fakes/FakeModel.h"
#include "fakes/FakeRepository.h"
#include "grpc_service.grpc.pb.h"
#include "server/grpc/GrpcServer.h"

namespace ortserve::grpc_test {

using inference::GRPCInferenceService;

inline inference::ModelConfig MakeConfig(const std::string& name, int max_batch_size) {
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

inline std::string LengthPrefixed(std::initializer_list<std::string> elements) {
  std::string out;
  for (const std::string& element : elements) {
    const uint32_t length = static_cast<uint32_t>(element.size());
    out.append(reinterpret_cast<const char*>(&length), 4);
    out += element;
  }
  return out;
}

// A model of MakeConfig(name, max_batch_size) that adds one, on its own
// threads; `gated`: it holds every request until released.
inline std::shared_ptr<FakeModel> AddOneModel(const std::string& name, int max_batch_size, bool gated = false) {
  return std::make_shared<FakeModel>(FakeModel::Options{.name = name,
                                                        .config = MakeConfig(name, max_batch_size),
                                                        .reply = FakeModel::Reply::kAddOne,
                                                        .on = FakeModel::AnswerThread::kOwnThread,
                                                        .hold = gated,
                                                        .stats_max_batch_size = 4});
}

class GrpcServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(GrpcServerOptions{}); }
  void TearDown() override {
    if (server_) server_->Stop(std::chrono::seconds(5));
  }

  void StartServer(GrpcServerOptions options) {
    add_one_ = AddOneModel("add_one", 0);
    batched_ = AddOneModel("batched", 8);
    gated_ = AddOneModel("gated", 0, /*gated=*/true);
    repository_.Add(add_one_);
    repository_.Add(batched_);
    repository_.Add(gated_);
    repository_.AddUnavailable("broken", "1", "model.onnx is not a valid ONNX file");
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

}  // namespace ortserve::grpc_test
