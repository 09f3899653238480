// InferResponseEncoder: JSON outputs of each datatype and binary outputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "server/http/InferResponseEncoder.h"
#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

template <typename T>
Tensor Make(std::string name, DataType dtype, Shape shape, std::vector<T> values) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = TensorData::Copy(values.data(), values.size() * sizeof(T));
  return t;
}

Tensor MakeBytes(std::string name, Shape shape, const std::vector<std::string>& values) {
  std::string buf;
  for (const auto& v : values) {
    const uint32_t n = static_cast<uint32_t>(v.size());
    buf.append(reinterpret_cast<const char*>(&n), 4);
    buf += v;
  }
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kBytes;
  t.shape = std::move(shape);
  t.data = TensorData::Copy(buf.data(), buf.size());
  return t;
}

InferenceResponse Response(std::vector<Tensor> outputs) {
  InferenceResponse r;
  r.model_name = "simple";
  r.model_version = "1";
  for (const auto& t : outputs) r.requested.push_back({t.name, false});
  r.outputs = std::move(outputs);
  return r;
}

TEST(HttpInferResponseEncoder, JsonOutputsOfEachType) {
  auto r = Response({Make<int32_t>("i", DataType::kInt32, {2, 2}, {1, -2, 3, 2147483647}),
                     Make<uint8_t>("b", DataType::kBool, {2}, {1, 0}),
                     Make<int64_t>("l", DataType::kInt64, {1}, {std::numeric_limits<int64_t>::min()}),
                     Make<uint64_t>("u", DataType::kUint64, {1}, {std::numeric_limits<uint64_t>::max()}),
                     Make<float>("f", DataType::kFp32, {4}, {0.1f, -2.5f, NAN, -INFINITY}),
                     Make<double>("d", DataType::kFp64, {1}, {1e300}),
                     Make<uint16_t>("h", DataType::kFp16, {2}, {0x3c00, 0xc000}),     // 1.0, -2.0
                     Make<uint16_t>("bf", DataType::kBf16, {1}, {0x3fc0}),            // 1.5
                     MakeBytes("s", {2}, {"hi", "q\"\\\n\x01"})});
  r.id = "abc";
  auto enc = EncodeInferResponse(r, false, false);
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  EXPECT_FALSE(enc->has_binary());
  EXPECT_EQ(enc->json,
            R"({"model_name":"simple","model_version":"1","id":"abc","outputs":[)"
            R"({"name":"i","datatype":"INT32","shape":[2,2],"data":[1,-2,3,2147483647]},)"
            R"({"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},)"
            R"({"name":"l","datatype":"INT64","shape":[1],"data":[-9223372036854775808]},)"
            R"({"name":"u","datatype":"UINT64","shape":[1],"data":[18446744073709551615]},)"
            R"({"name":"f","datatype":"FP32","shape":[4],"data":[0.1,-2.5,NaN,-Infinity]},)"
            R"({"name":"d","datatype":"FP64","shape":[1],"data":[1e+300]},)"
            R"({"name":"h","datatype":"FP16","shape":[2],"data":[1,-2]},)"
            R"({"name":"bf","datatype":"BF16","shape":[1],"data":[1.5]},)"
            R"({"name":"s","datatype":"BYTES","shape":[2],"data":["hi","q\"\\\n\u0001"]}]})");
}

TEST(HttpInferResponseEncoder, NoIdWhenEmpty) {
  auto enc = EncodeInferResponse(Response({Make<int8_t>("x", DataType::kInt8, {1}, {-1})}), false, false);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->json.find("\"id\""), std::string::npos);
}

TEST(HttpInferResponseEncoder, BinaryOutputsAreNotCopied) {
  auto r = Response({Make<float>("y", DataType::kFp32, {1, 2}, {1.0f, 2.0f}), MakeBytes("s", {1}, {"xyz"}),
                     Make<int32_t>("j", DataType::kInt32, {1}, {9})});
  r.requested[0].binary_data = true;
  r.requested[1].binary_data = true;
  auto enc = EncodeInferResponse(r, /*outputs_listed=*/true, /*binary_data_output=*/false);
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  EXPECT_EQ(enc->json,
            R"({"model_name":"simple","model_version":"1","outputs":[)"
            R"({"name":"y","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},)"
            R"({"name":"s","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":7}},)"
            R"({"name":"j","datatype":"INT32","shape":[1],"data":[9]}]})");
  ASSERT_EQ(enc->binary.size(), 2u);
  EXPECT_EQ(enc->binary[0].data(), r.outputs[0].data.data());
  EXPECT_EQ(enc->binary[1].data(), r.outputs[1].data.data());
  EXPECT_EQ(enc->binary_bytes, 15u);
}

TEST(HttpInferResponseEncoder, RequestLevelBinaryWhenOutputsNotListed) {
  auto r = Response({Make<float>("y", DataType::kFp32, {1}, {1.0f})});
  auto enc = EncodeInferResponse(r, /*outputs_listed=*/false, /*binary_data_output=*/true);
  ASSERT_TRUE(enc.ok());
  EXPECT_TRUE(enc->has_binary());
  EXPECT_THAT(enc->json, ::testing::HasSubstr(R"("parameters":{"binary_data_size":4})"));
}

TEST(HttpInferResponseEncoder, DataThatDoesNotMatchItsShapeIsAnInternalError) {
  auto r = Response({Make<float>("y", DataType::kFp32, {3}, {1.0f})});
  auto enc = EncodeInferResponse(r, false, false);
  ASSERT_FALSE(enc.ok());
  EXPECT_EQ(enc.status().code(), StatusCode::kInternal);
  EXPECT_THAT(enc.status().message(), ::testing::HasSubstr("output 'y' has 4 bytes, shape [3] of FP32 needs 12"));
  auto b = Response({MakeBytes("s", {2}, {"a"})});
  EXPECT_EQ(EncodeInferResponse(b, false, false).status().code(), StatusCode::kInternal);
}

TEST(HttpJsonWriter, ErrorJsonEscapes) {
  EXPECT_EQ(ErrorJson("bad \"x\"\n"), R"({"error":"bad \"x\"\n"})");
}

}  // namespace
}  // namespace ortserve::http

namespace ortserve::http {
namespace {

TEST(HttpInferResponseEncoder, ResponseParametersAreEmittedOnlyWhenPresent) {
  auto plain = EncodeInferResponse(Response({Make<int32_t>("i", DataType::kInt32, {1}, {7})}), false, false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->json.find("\"parameters\""), std::string::npos) << plain->json;

  auto r = Response({Make<int32_t>("i", DataType::kInt32, {1}, {7})});
  r.parameters.emplace_back("ortserve_fallback_from", "big");
  auto enc = EncodeInferResponse(r, false, false);
  ASSERT_TRUE(enc.ok());
  EXPECT_NE(enc->json.find("\"parameters\":{\"ortserve_fallback_from\":\"big\"}"), std::string::npos)
      << enc->json;
}

}  // namespace
}  // namespace ortserve::http
