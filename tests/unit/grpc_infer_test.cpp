// ModelInfer and ModelStreamInfer through the gRPC front end: contents of
// every kind, errors, completion order on a stream, cancellation reaching
// the request, and the sequence parameters reaching the model, against fake
// models answering from their own threads.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "GrpcServerFixture.h"

namespace ortserve {
namespace {

using namespace grpc_test;

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
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "Request for unknown model: 'no_such_model' is not found");

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

class GrpcSequenceTest : public GrpcServerTest {
 protected:
  // Request `id` to the gated model, of sequence `sequence_id` with these
  // flags, as tritonclient.grpc builds it.
  static inference::ModelInferRequest SequenceRequest(const std::string& id, int64_t sequence_id, bool start,
                                                      bool end) {
    inference::ModelInferRequest request = AddOneRequest("gated", id);
    (*request.mutable_parameters())["sequence_id"].set_int64_param(sequence_id);
    (*request.mutable_parameters())["sequence_start"].set_bool_param(start);
    (*request.mutable_parameters())["sequence_end"].set_bool_param(end);
    return request;
  }
};

TEST_F(GrpcSequenceTest, SequenceParametersReachTheModelOverModelInfer) {
  grpc::ClientContext ctx;
  inference::ModelInferResponse response;
  std::atomic<bool> done{false};
  grpc::Status status;
  const inference::ModelInferRequest request = SequenceRequest("u", 41, /*start=*/true, /*end=*/false);
  stub_->async()->ModelInfer(&ctx, &request, &response, [&](grpc::Status s) {
    status = s;
    done = true;
  });
  std::unique_ptr<InferenceRequest> held = gated_->TakeHeld();
  EXPECT_EQ(held->sequence.id, 41u);
  EXPECT_TRUE(held->sequence.start);
  EXPECT_FALSE(held->sequence.end);
  gated_->Answer(*held);
  while (!done) std::this_thread::yield();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(GrpcSequenceTest, SequenceParametersReachTheModelOverAStreamAndABadOneDoesNotEndIt) {
  grpc::ClientContext ctx;
  auto stream = stub_->ModelStreamInfer(&ctx);
  inference::ModelInferRequest string_id = SequenceRequest("s1", 0, /*start=*/true, /*end=*/true);
  (*string_id.mutable_parameters())["sequence_id"].set_string_param("stream-seq");
  ASSERT_TRUE(stream->Write(string_id));
  std::unique_ptr<InferenceRequest> held = gated_->TakeHeld();
  EXPECT_EQ(held->sequence.string_id, "stream-seq");
  EXPECT_TRUE(held->sequence.start && held->sequence.end);
  gated_->Answer(*held);
  inference::ModelStreamInferResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.error_message(), "");
  EXPECT_EQ(response.infer_response().id(), "s1");

  // Refused by the decoder: an error_message on the stream, which goes on.
  ASSERT_TRUE(stream->Write(SequenceRequest("bad", -1, /*start=*/true, /*end=*/false)));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_NE(response.error_message().find("invalid value for 'sequence_id' parameter: -1 is negative"),
            std::string::npos)
      << response.error_message();

  ASSERT_TRUE(stream->Write(SequenceRequest("s2", 42, /*start=*/false, /*end=*/true)));
  held = gated_->TakeHeld();
  EXPECT_EQ(held->sequence.id, 42u);
  EXPECT_FALSE(held->sequence.start);
  EXPECT_TRUE(held->sequence.end);
  gated_->Answer(*held);
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.infer_response().id(), "s2");
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace ortserve
