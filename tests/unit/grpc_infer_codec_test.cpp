// The gRPC infer codec without a network: zero-copy raw inputs, the element
// limit, Triton's correlation parameters, and the one mapping from Status to
// gRPC codes.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "GrpcServerFixture.h"
#include "server/grpc/GrpcInferCodec.h"

namespace ortserve {
namespace {

using namespace grpc_test;

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

// A one-input request whose parameters `set` fills, decoded.
Status DecodeWithParameters(const std::function<void(inference::ModelInferRequest*)>& set,
                            InferenceRequest* request) {
  auto message = std::make_shared<inference::ModelInferRequest>();
  message->set_model_name("m");
  auto* input = message->add_inputs();
  input->set_name("x");
  input->set_datatype("INT32");
  input->add_shape(1);
  message->add_raw_input_contents(RawBytes<int32_t>({1}));
  set(message.get());
  return grpcfe::DecodeInferRequest(message, request);
}

inference::InferParameter& Param(inference::ModelInferRequest* m, const std::string& name) {
  return (*m->mutable_parameters())[name];
}

TEST(GrpcInferCodecTest, SequenceParametersAsTritonclientSendsThem) {
  // tritonclient.grpc: int64_param for a number, bool_params for the flags.
  InferenceRequest request;
  ASSERT_TRUE(DecodeWithParameters(
                  [](inference::ModelInferRequest* m) {
                    Param(m, "sequence_id").set_int64_param(1000);
                    Param(m, "sequence_start").set_bool_param(true);
                    Param(m, "sequence_end").set_bool_param(false);
                  },
                  &request)
                  .ok());
  EXPECT_EQ(request.sequence.id, 1000u);
  EXPECT_TRUE(request.sequence.string_id.empty());
  EXPECT_TRUE(request.sequence.start);
  EXPECT_FALSE(request.sequence.end);

  InferenceRequest by_string;
  ASSERT_TRUE(DecodeWithParameters(
                  [](inference::ModelInferRequest* m) {
                    Param(m, "sequence_id").set_string_param("5f0c-uuid");
                    Param(m, "sequence_start").set_bool_param(false);
                    Param(m, "sequence_end").set_bool_param(true);
                  },
                  &by_string)
                  .ok());
  EXPECT_EQ(by_string.sequence.string_id, "5f0c-uuid");
  EXPECT_EQ(by_string.sequence.id, 0u);
  EXPECT_TRUE(by_string.sequence.end);

  // uint64_param reaches the ids an int64 cannot hold.
  InferenceRequest wide;
  ASSERT_TRUE(DecodeWithParameters(
                  [](inference::ModelInferRequest* m) {
                    Param(m, "sequence_id").set_uint64_param(std::numeric_limits<uint64_t>::max());
                  },
                  &wide)
                  .ok());
  EXPECT_EQ(wide.sequence.id, std::numeric_limits<uint64_t>::max());

  // No id, or id 0 with false flags: a stateless request.
  for (const bool zero : {false, true}) {
    InferenceRequest stateless;
    ASSERT_TRUE(DecodeWithParameters(
                    [zero](inference::ModelInferRequest* m) {
                      if (zero) Param(m, "sequence_id").set_int64_param(0);
                      Param(m, "sequence_start").set_bool_param(false);
                    },
                    &stateless)
                    .ok());
    EXPECT_FALSE(stateless.sequence.has_id());
  }
}

TEST(GrpcInferCodecTest, MalformedSequenceParametersAreInvalidArgumentNamingTheParameter) {
  using Setter = std::function<void(inference::ModelInferRequest*)>;
  const std::vector<std::pair<Setter, std::string>> cases = {
      {[](auto* m) { Param(m, "sequence_id").set_int64_param(-3); },
       "invalid value for 'sequence_id' parameter: -3 is negative"},
      {[](auto* m) { Param(m, "sequence_id").set_bool_param(true); },
       "invalid value type for 'sequence_id' parameter, expected int64_param, uint64_param or string_param, "
       "got bool_param"},
      {[](auto* m) { Param(m, "sequence_id").set_double_param(2.0); }, "got double_param"},
      {[](auto* m) { Param(m, "sequence_id"); }, "'sequence_id' parameter, expected int64_param, uint64_param or "
                                                 "string_param, got no value"},
      {[](auto* m) {
         Param(m, "sequence_id").set_int64_param(4);
         Param(m, "sequence_start").set_int64_param(1);
       },
       "invalid value type for 'sequence_start' parameter, expected bool_param, got int64_param"},
      {[](auto* m) {
         Param(m, "sequence_id").set_int64_param(4);
         Param(m, "sequence_end").set_string_param("true");
       },
       "invalid value type for 'sequence_end' parameter, expected bool_param, got string_param"},
      {[](auto* m) { Param(m, "sequence_start").set_bool_param(true); },
       "parameter 'sequence_start' is true but 'sequence_id' is missing, 0 or empty"},
      {[](auto* m) {
         Param(m, "sequence_id").set_int64_param(0);
         Param(m, "sequence_start").set_bool_param(true);
       },
       "parameter 'sequence_start' is true but 'sequence_id' is missing, 0 or empty"},
      {[](auto* m) {
         Param(m, "sequence_id").set_string_param("");
         Param(m, "sequence_end").set_bool_param(true);
       },
       "parameter 'sequence_end' is true but 'sequence_id' is missing, 0 or empty"},
      {[](auto* m) { Param(m, "sequence_id").set_string_param(std::string(129, 'q')); },
       "parameter 'sequence_id': string correlation ID cannot be longer than 128 characters (got 129)"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].second);
    InferenceRequest request;
    const Status status = DecodeWithParameters(cases[i].first, &request);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(grpcfe::ToGrpcCode(status.code()), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.message().find(cases[i].second), std::string::npos) << status.message();
  }
  // 128 characters is Triton's limit, and allowed.
  InferenceRequest longest;
  EXPECT_TRUE(DecodeWithParameters([](auto* m) { Param(m, "sequence_id").set_string_param(std::string(128, 'q')); },
                                   &longest)
                  .ok());
}

// Triton's classification extension: int64_param above 0, as tritonclient's
// InferRequestedOutput(class_count=N) sends it; anything else is refused
// with Triton's wording, naming the output.
TEST(GrpcInferCodecTest, ClassificationParameterPerOutput) {
  auto decode = [](const std::function<void(inference::InferParameter*)>& set, InferenceRequest* request) {
    auto message = std::make_shared<inference::ModelInferRequest>();
    message->set_model_name("m");
    auto* output = message->add_outputs();
    output->set_name("prob");
    if (set) set(&(*output->mutable_parameters())["classification"]);
    message->add_outputs()->set_name("plain");
    return grpcfe::DecodeInferRequest(message, request);
  };
  InferenceRequest request;
  ASSERT_TRUE(decode([](auto* p) { p->set_int64_param(5); }, &request).ok());
  ASSERT_EQ(request.requested_outputs.size(), 2u);
  EXPECT_EQ(request.requested_outputs[0].classification, 5u);
  EXPECT_EQ(request.requested_outputs[1].classification, 0u);

  const std::vector<std::pair<std::function<void(inference::InferParameter*)>, std::string>> bad = {
      {[](auto* p) { p->set_int64_param(0); }, "output 'prob': invalid value for 'classification' parameter"},
      {[](auto* p) { p->set_int64_param(-2); }, "got -2"},
      {[](auto* p) { p->set_uint64_param(3); },
       "output 'prob': invalid value type for 'classification' parameter, expected int64_param, got uint64_param"},
      {[](auto* p) { p->set_string_param("3"); }, "got string_param"},
  };
  for (const auto& [set, expected] : bad) {
    SCOPED_TRACE(expected);
    InferenceRequest refused;
    const Status status = decode(set, &refused);
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(grpcfe::ToGrpcCode(status.code()), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.message().find(expected), std::string::npos) << status.message();
  }
}

TEST(GrpcInferCodecTest, StatusCodesMapInOnePlace) {
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kNotFound), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kUnavailable), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kUnsupported), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kInternal), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(grpcfe::ToGrpcStatus(Unavailable("queue full")).error_message(), "queue full");
}

// The statistics handler sets durations by these names (the HTTP front end
// writes them as JSON keys): each must be a StatisticDuration of the proto.

}  // namespace
}  // namespace ortserve
