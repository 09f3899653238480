// The gRPC infer codec without a network: zero-copy raw inputs, the element
// limit, and the one mapping from Status to gRPC codes.
#include <gtest/gtest.h>

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

TEST(GrpcInferCodecTest, StatusCodesMapInOnePlace) {
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kNotFound), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kUnavailable), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kUnsupported), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(grpcfe::ToGrpcCode(StatusCode::kInternal), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(grpcfe::ToGrpcStatus(Unavailable("queue full")).error_message(), "queue full");
}

// The statistics handler sets durations by these names (the HTTP front end
// writes them as JSON keys): each must be a StatisticDuration of the proto.

}  // namespace
}  // namespace ortserve
