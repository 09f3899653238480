// InferRequestDecoder: JSON and binary inputs, and every wire-level error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "server/http/HttpStatus.h"
#include "server/http/InferRequestDecoder.h"
#include "serving/RequestValidator.h"

namespace ortserve::http {
namespace {

using ::testing::HasSubstr;

Result<DecodedInferRequest> Decode(const std::string& body, std::optional<std::string> header_length = std::nullopt,
                                   InferDecodeOptions options = {}) {
  auto shared = std::make_shared<const std::string>(body);
  std::optional<std::string_view> hl;
  if (header_length) hl = *header_length;
  return DecodeInferRequest(shared, hl, options);
}

template <typename T>
std::vector<T> As(const Tensor& t) {
  std::vector<T> v(t.data.size() / sizeof(T));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

std::string BytesElement(std::string_view s) {
  std::string out(4, '\0');
  const uint32_t n = static_cast<uint32_t>(s.size());
  std::memcpy(out.data(), &n, 4);
  out.append(s);
  return out;
}

std::string Input(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& data) {
  return R"({"name":")" + name + R"(","datatype":")" + dtype + R"(","shape":)" + shape + R"(,"data":)" + data + "}";
}

std::string Body(const std::string& inputs) { return R"({"inputs":[)" + inputs + "]}"; }

// Expects an error with the given HTTP status whose message contains `text`.
void ExpectError(const Result<DecodedInferRequest>& r, unsigned http_status, const std::string& text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(HttpStatusFor(r.status().code()), http_status) << r.status().message();
  EXPECT_THAT(r.status().message(), HasSubstr(text));
}

TEST(HttpInferRequestDecoder, JsonIntegersOfEveryWidth) {
  auto r = Decode(Body(Input("u8", "UINT8", "[3]", "[0,1,255]") + "," + Input("i8", "INT8", "[2]", "[-128,127]") +
                       "," + Input("u16", "UINT16", "[1]", "[65535]") + "," + Input("i16", "INT16", "[1]", "[-32768]") +
                       "," + Input("u32", "UINT32", "[1]", "[4294967295]") + "," +
                       Input("i32", "INT32", "[2]", "[-2147483648,7]") + "," +
                       Input("u64", "UINT64", "[1]", "[18446744073709551615]") + "," +
                       Input("i64", "INT64", "[2]", "[-9223372036854775808,9223372036854775807]")));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& in = r->request->inputs;
  ASSERT_EQ(in.size(), 8u);
  EXPECT_EQ(As<uint8_t>(in[0]), (std::vector<uint8_t>{0, 1, 255}));
  EXPECT_EQ(As<int8_t>(in[1]), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(As<uint16_t>(in[2]), (std::vector<uint16_t>{65535}));
  EXPECT_EQ(As<int16_t>(in[3]), (std::vector<int16_t>{-32768}));
  EXPECT_EQ(As<uint32_t>(in[4]), (std::vector<uint32_t>{4294967295u}));
  EXPECT_EQ(As<int32_t>(in[5]), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 7}));
  EXPECT_EQ(As<uint64_t>(in[6]), (std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()}));
  EXPECT_EQ(As<int64_t>(in[7]),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(in[7].dtype, DataType::kInt64);
  EXPECT_EQ(in[7].shape, (Shape{2}));
}

TEST(HttpInferRequestDecoder, JsonBoolFloatsAndBytes) {
  auto r = Decode(Body(Input("b", "BOOL", "[3]", "[true,false,true]") + "," +
                       Input("f", "FP32", "[3]", "[1.5,-2,3e-3]") + "," + Input("d", "FP64", "[2]", "[0.1,-7]") +
                       "," + Input("s", "BYTES", "[2]", R"(["hello","a\"b\u00e9"])")));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& in = r->request->inputs;
  EXPECT_EQ(As<uint8_t>(in[0]), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(As<float>(in[1]), (std::vector<float>{1.5f, -2.0f, 3e-3f}));
  EXPECT_EQ(As<double>(in[2]), (std::vector<double>{0.1, -7.0}));
  const std::string bytes(reinterpret_cast<const char*>(in[3].data.data()), in[3].data.size());
  EXPECT_EQ(bytes, BytesElement("hello") + BytesElement("a\"b\xc3\xa9"));
}

TEST(HttpInferRequestDecoder, NestedDataIsFlattenedRowMajor) {
  auto r = Decode(Body(Input("x", "INT32", "[2,3]", "[[1,2,3],[4,5,6]]")));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(As<int32_t>(r->request->inputs[0]), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  auto s = Decode(Body(Input("s", "BYTES", "[2,1]", R"([["a"],["bc"]])")));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->request->inputs[0].data.size(), 4u + 1 + 4 + 2);
}

TEST(HttpInferRequestDecoder, IdParametersAndOutputs) {
  auto r = Decode(R"({"id":"req-7","parameters":{"timeout":1500,"priority":2,"binary_data_output":true,"sequence_id":0},)"
                  R"("inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}],)"
                  R"("outputs":[{"name":"a"},{"name":"b","parameters":{"binary_data":false}}]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->request->id, "req-7");
  EXPECT_EQ(r->request->timeout_us, 1500u);
  EXPECT_EQ(r->request->priority, 2u);
  EXPECT_TRUE(r->binary_data_output);
  EXPECT_TRUE(r->outputs_listed);
  ASSERT_EQ(r->request->requested_outputs.size(), 2u);
  EXPECT_EQ(r->request->requested_outputs[0].name, "a");
  EXPECT_TRUE(r->request->requested_outputs[0].binary_data);   // request default
  EXPECT_FALSE(r->request->requested_outputs[1].binary_data);  // output overrides
  EXPECT_EQ(r->request->requested_outputs[0].classification, 0u);
  auto none = Decode(Body(Input("x", "FP32", "[1]", "[1]")));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->outputs_listed);
  EXPECT_FALSE(none->binary_data_output);
}

TEST(HttpInferRequestDecoder, BinaryInputsViewTheBody) {
  const std::string json =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":12}},)"
      R"({"name":"h","datatype":"FP16","shape":[1],"parameters":{"binary_data_size":2}}],)"
      R"("outputs":[{"name":"y","parameters":{"binary_data":true}}]})";
  std::string body = json;
  const float xs[2] = {1.25f, -3.0f};
  body.append(reinterpret_cast<const char*>(xs), 8);
  body += BytesElement("ab") + BytesElement("cd");
  body += std::string("\x00\x3c", 2);  // FP16 1.0
  auto shared = std::make_shared<const std::string>(body);
  auto r = DecodeInferRequest(shared, std::to_string(json.size()));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& in = r->request->inputs;
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(As<float>(in[0]), (std::vector<float>{1.25f, -3.0f}));
  // Zero copy: the tensor points into the body and keeps it alive.
  const auto* begin = reinterpret_cast<const std::byte*>(shared->data());
  EXPECT_EQ(in[0].data.data(), begin + json.size());
  EXPECT_EQ(in[1].data.data(), begin + json.size() + 8);
  EXPECT_EQ(in[1].data.size(), 12u);
  EXPECT_EQ(in[2].dtype, DataType::kFp16);
  EXPECT_EQ(in[0].data.owner().get(), static_cast<const void*>(shared.get()));
  EXPECT_TRUE(r->request->requested_outputs[0].binary_data);
}

TEST(HttpInferRequestDecoder, BadInferenceHeaderLength) {
  const std::string body = Body(Input("x", "FP32", "[1]", "[1]"));
  ExpectError(Decode(body, "abc"), 400, "Inference-Header-Content-Length must be a non-negative integer");
  ExpectError(Decode(body, "-5"), 400, "Inference-Header-Content-Length must be a non-negative integer");
  ExpectError(Decode(body, "12x"), 400, "Inference-Header-Content-Length must be a non-negative integer");
  ExpectError(Decode(body, std::to_string(body.size() + 1)), 400, "larger than the request body");
  ExpectError(Decode(body, "99999999999999999999999"), 400, "Inference-Header-Content-Length");
  ExpectError(Decode(body, "0"), 400, "no JSON");
}

TEST(HttpInferRequestDecoder, BinaryDataSizeErrors) {
  auto with_binary = [](const std::string& input_json, const std::string& binary) {
    const std::string json = R"({"inputs":[)" + input_json + "]}";
    return Decode(json + binary, std::to_string(json.size()));
  };
  ExpectError(with_binary(R"({"name":"x","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}})",
                          std::string(4, '\0')),
              400, "binary_data_size 8 runs past the end of the body");
  ExpectError(with_binary(R"({"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}})",
                          std::string(6, '\0')),
              400, "2 bytes of binary data follow the inputs");
  ExpectError(with_binary(R"({"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":-4}})", ""),
              400, "binary_data_size must be a non-negative integer");
  ExpectError(with_binary(R"({"name":"x","datatype":"FP32","shape":[1],"data":[1],"parameters":{"binary_data_size":4}})",
                          std::string(4, '\0')),
              400, "both 'data' and binary_data_size");
  // binary_data_size without the header: the whole body is JSON.
  ExpectError(Decode(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4}}]})"),
              400, "no Inference-Header-Content-Length");
}

// Binary data frames a tensor; whether its bytes fit the shape is the request
// validator's check, shared with gRPC's raw_input_contents.
TEST(HttpInferRequestDecoder, BinaryDataNotFittingItsShapeIsLeftToTheValidator) {
  inference::ModelConfig config;
  config.set_name("m");
  for (const auto& [name, type, dim] :
       {std::tuple("x", inference::TYPE_FP32, 3), std::tuple("s", inference::TYPE_STRING, 2)}) {
    auto* input = config.add_input();
    input->set_name(name);
    input->set_data_type(type);
    input->add_dims(dim);
    input->set_optional(true);
  }
  auto validate = [&](const std::string& input_json, const std::string& binary) {
    const std::string json = R"({"inputs":[)" + input_json + "]}";
    auto decoded = Decode(json + binary, std::to_string(json.size()));
    EXPECT_TRUE(decoded.ok()) << decoded.status().message();
    return decoded.ok() ? ValidateRequest(config, *decoded->request) : decoded.status();
  };
  EXPECT_THAT(validate(R"({"name":"x","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":8}})",
                       std::string(8, '\0')).message(),
              HasSubstr("input 'x' for model 'm': shape [3] of FP32 needs 12 bytes, got 8"));
  EXPECT_THAT(validate(R"({"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":6}})",
                       // "\x00" "ab" split: "\x00ab" would be one hex escape (0xab),
                       // leaving a 5-byte literal read as 6 (ASan global-buffer-overflow).
                       std::string("\x09\x00\x00\x00" "ab", 6)).message(),
              HasSubstr("input 's' for model 'm': malformed BYTES data"));
  EXPECT_THAT(validate(R"({"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":6}})",
                       BytesElement("ab")).message(),
              HasSubstr("input 's' for model 'm': shape [2] needs 2 BYTES elements, got 1"));
}

TEST(HttpInferRequestDecoder, RepeatedNamesAreLeftToTheValidator) {
  // As for gRPC: the request validator rejects a repeated input or output
  // (repository_validation_test), so the decoder keeps them all, in order.
  auto r = Decode(R"({"inputs":[)" + Input("x", "FP32", "[1]", "[1]") + "," + Input("x", "FP32", "[1]", "[2]") +
                  R"(],"outputs":[{"name":"y"},{"name":"y"}]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->request->inputs.size(), 2u);
  EXPECT_EQ(r->request->inputs[1].name, "x");
  ASSERT_EQ(r->request->requested_outputs.size(), 2u);
}

TEST(HttpInferRequestDecoder, WireLevelJsonErrors) {
  ExpectError(Decode(Body(Input("x", "FLOAT32", "[1]", "[1]"))), 400, "unknown datatype 'FLOAT32'");
  ExpectError(Decode(Body(Input("x", "FP32", "[-1]", "[1]"))), 400, "'shape' must be an array of non-negative integers");
  ExpectError(Decode(Body(Input("x", "FP32", "[1.5]", "[1]"))), 400, "'shape' must be an array of non-negative integers");
  ExpectError(Decode(Body(Input("x", "FP32", "3", "[1]"))), 400, "'shape' must be an array");
  ExpectError(Decode(Body(Input("x", "FP32", "[2,2]", "[1,2,3]"))), 400, "data has 3 elements, shape [2,2] needs 4");
  ExpectError(Decode(Body(Input("x", "FP32", "[2,2]", "[[1,2],[3,4],[5]]"))), 400,
              "data has 5 elements, shape [2,2] needs 4");
  ExpectError(Decode(Body(Input("x", "FP32", "[2]", "[[1,2,3,4,5,6]]"))), 400, "data has 6 elements, shape [2] needs 2");
  // A wrong count is reported before a bad element, wherever the bad element is.
  ExpectError(Decode(Body(Input("x", "FP32", "[3]", R"(["a",2])"))), 400, "data has 2 elements, shape [3] needs 3");
  ExpectError(Decode(Body(Input("x", "FP32", "[1]", R"([1,"b"])"))), 400, "data has 2 elements, shape [1] needs 1");
  ExpectError(Decode(Body(Input("x", "FP32", "[2]", R"([[1],["c"]])"))), 400, "data[1] is a string, expected a number");
  ExpectError(Decode(Body(Input("x", "UINT8", "[1]", "[256]"))), 400, "256 is out of range for UINT8");
  ExpectError(Decode(Body(Input("x", "INT8", "[1]", "[-129]"))), 400, "-129 is out of range for INT8");
  ExpectError(Decode(Body(Input("x", "UINT32", "[1]", "[-1]"))), 400, "expected a non-negative integer for UINT32");
  ExpectError(Decode(Body(Input("x", "INT32", "[1]", "[1.5]"))), 400, "data[0] is a number, expected an integer");
  ExpectError(Decode(Body(Input("x", "FP32", "[2]", R"([1,"2"])"))), 400, "data[1] is a string, expected a number");
  ExpectError(Decode(Body(Input("x", "BOOL", "[1]", "[1]"))), 400, "expected true or false");
  ExpectError(Decode(Body(Input("x", "FP64", "[3]", "[1,2,true]"))), 400, "data[2] is a boolean, expected a number for FP64");
  ExpectError(Decode(Body(Input("x", "FP32", "[2]", "[0.5,null]"))), 400, "data[1] is null, expected a number");
  ExpectError(Decode(Body(Input("x", "INT64", "[2]", "[1,18446744073709551615]"))), 400,
              "data[1] is a number, expected an integer for INT64");
  ExpectError(Decode(Body(Input("x", "UINT16", "[2,1]", "[[1],[65536]]"))), 400,
              "data[1] = 65536 is out of range for UINT16");
  ExpectError(Decode(Body(Input("x", "INT16", "[2]", R"([1,{"a":1}])"))), 400, "data[1] is an object, expected an integer");
  ExpectError(Decode(Body(Input("x", "BYTES", "[1]", "[1]"))), 400, "expected a string for BYTES");
  ExpectError(Decode(Body(Input("x", "FP16", "[1]", "[1.0]"))), 400, "FP16 data must use the binary data extension");
  ExpectError(Decode(Body(Input("x", "BF16", "[1]", "[1.0]"))), 400, "BF16 data must use the binary data extension");
  ExpectError(Decode(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})"), 400,
              "neither 'data' nor binary_data_size");
  ExpectError(Decode(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})"), 400, "has no 'name'");
  ExpectError(Decode(R"({"inputs":{}})"), 400, "'inputs' array");
  ExpectError(Decode(R"({"inputs":[1]})"), 400, "inputs[0] must be an object");
  ExpectError(Decode(R"([1,2])"), 400, "must be an object");
  ExpectError(Decode(R"({"inputs":[)"), 400, "malformed request JSON");
  ExpectError(Decode("not json"), 400, "malformed request JSON");
  ExpectError(Decode(R"({"id":5,"inputs":[]})"), 400, "'id' must be a string");
  ExpectError(Decode(R"({"parameters":{"timeout":-1},"inputs":[]})"), 400, "'timeout' must be a non-negative integer");
  ExpectError(Decode(R"({"parameters":{"priority":"high"},"inputs":[]})"), 400, "'priority'");
  ExpectError(Decode(R"({"parameters":{"binary_data_output":1},"inputs":[]})"), 400, "'binary_data_output' must be a boolean");
  ExpectError(Decode(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"binary_data":"yes"}}]})"), 400,
              "binary_data must be a boolean");
  ExpectError(Decode(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"classification":-3}}]})"), 400,
              "output 'y': Unable to set 'classification': expected a non-negative integer");
  ExpectError(Decode(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"classification":2.5}}]})"), 400,
              "'classification'");
  ExpectError(Decode(R"({"inputs":[],"outputs":[{"name":"y","parameters":{"classification":"3"}}]})"), 400,
              "got a string");
}

// Triton's classification extension: the number of classes per output; 0
// asks for the tensor itself, as tritonclient's class_count=0 does.
TEST(HttpInferRequestDecoder, ClassificationParameterPerOutput) {
  auto r = Decode(R"({"inputs":[],"outputs":[{"name":"a","parameters":{"classification":3,"binary_data":true}},)"
                  R"({"name":"b","parameters":{"classification":0}},{"name":"c"}]})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->request->requested_outputs.size(), 3u);
  EXPECT_EQ(r->request->requested_outputs[0].classification, 3u);
  EXPECT_TRUE(r->request->requested_outputs[0].binary_data);
  EXPECT_EQ(r->request->requested_outputs[1].classification, 0u);
  EXPECT_EQ(r->request->requested_outputs[2].classification, 0u);
}

TEST(HttpInferRequestDecoder, SizeOverflowAndLimit) {
  ExpectError(Decode(Body(Input("x", "FP32", "[4611686018427387904,4611686018427387904]", "[1]"))), 400,
              "shape [4611686018427387904,4611686018427387904] causes total element count to exceed maximum size of");
  ExpectError(Decode(Body(Input("x", "FP64", "[4611686018427387904]", "[1]"))), 400, "byte size of FP64");
  // Within uint64 but over the configured limit: 400 (as Triton) before
  // anything is allocated, in Triton's words.
  ExpectError(Decode(Body(Input("x", "FP32", "[1000000]", "[1]")), std::nullopt, {.max_tensor_bytes = 1024}), 400,
              "input 'x': FP32 [1000000] of size 4000000 bytes exceeds the maximum allowed input size of 1024 bytes. "
              "Use --http-max-input-size to increase the limit.");
}

TEST(HttpInferRequestDecoder, ElementLimitComesFromTheShapeAfterOverflowChecks) {
  const InferDecodeOptions ten = {.max_tensor_elements = 10};
  auto r = Decode(Body(Input("x", "FP32", "[2,5]", "[[1,2,3,4,5],[6,7,8,9,10]]")), std::nullopt, ten);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(As<float>(r->request->inputs[0]).back(), 10.f);
  // The data is never looked at: the shape alone is over the limit.
  ExpectError(Decode(Body(Input("x", "FP32", "[1,11]", "\"not data\"")), std::nullopt, ten), 400,
              "input 'x': shape [1,11] has 11 elements, over the limit of 10 (--max-tensor-elements)");
  // A malformed (overflowing) shape is named as such before any limit.
  ExpectError(Decode(Body(Input("x", "FP64", "[4611686018427387904]", "[1]")), std::nullopt, ten), 400,
              "byte size of FP64");
}

TEST(HttpInferRequestDecoder, JsonDepthIsConfigurable) {
  // {"inputs":[{..."data":[[1]]}]}: object, array, object, array, array = 5 levels.
  const std::string five = Body(Input("x", "FP32", "[1,1]", "[[1]]"));
  EXPECT_TRUE(Decode(five, std::nullopt, {.max_json_depth = 5}).ok());
  ExpectError(Decode(five, std::nullopt, {.max_json_depth = 4}), 400,
              "JSON nesting depth exceeds maximum allowed limit (4): the request JSON nests objects and arrays "
              "deeper (--http-max-json-depth)");
  // Alternating depths on one thread reuse or replace its parser correctly.
  EXPECT_TRUE(Decode(five, std::nullopt, {.max_json_depth = 5}).ok());
  ExpectError(Decode(five, std::nullopt, {.max_json_depth = kMaxJsonDepthLimit + 1}), 500, "max_json_depth");
}

std::string Nested(size_t arrays, const std::string& leaf) {
  return std::string(arrays, '[') + leaf + std::string(arrays, ']');
}

// Triton's HTTP_MAX_JSON_NESTING_DEPTH: 99 arrays around an element pass, 100
// do not, whatever --http-max-json-depth allows; the depth is named before a
// wrong element count.
TEST(HttpInferRequestDecoder, DataNestingFollowsTritonsLimit) {
  const InferDecodeOptions deep_ok = {.max_json_depth = kMaxJsonDepthLimit};
  for (const auto& [dtype, leaf] : std::vector<std::pair<std::string, std::string>>{
           {"INT64", "123"}, {"FP32", "1.5"}, {"BYTES", R"("hello")"}}) {
    SCOPED_TRACE(dtype);
    auto ok = Decode(Body(Input("x", dtype, "[1,1]", Nested(99, leaf))), std::nullopt, deep_ok);
    EXPECT_TRUE(ok.ok()) << ok.status().message();
    ExpectError(Decode(Body(Input("x", dtype, "[1,1]", Nested(100, leaf))), std::nullopt, deep_ok), 400,
                "JSON nesting depth exceeds maximum allowed limit (100): input 'x' nests its 'data' arrays deeper");
    ExpectError(Decode(Body(Input("x", dtype, "[1,1]", Nested(120, leaf)))), 400, "maximum allowed limit (100)");
    ExpectError(Decode(Body(Input("x", dtype, "[1,3]", Nested(100, leaf))), std::nullopt, deep_ok), 400,
                "maximum allowed limit (100)");
  }
  // An empty array 99 arrays deep holds nothing at depth 100.
  EXPECT_EQ(Decode(Body(Input("x", "INT64", "[0,0]", Nested(100, ""))), std::nullopt, deep_ok).status().code(),
            StatusCode::kOk);
}

TEST(HttpInferRequestDecoder, DeepJsonIsRejected) {
  std::string deep(200, '[');
  deep += std::string(200, ']');
  ExpectError(Decode(Body(Input("x", "FP32", "[1]", deep))), 400, "maximum allowed limit (128)");
  // A hostile body of only brackets, with no object around it.
  ExpectError(Decode(std::string(100000, '[')), 400, "");
}

TEST(HttpInferRequestDecoder, EmptyShapeIsAScalar) {
  auto r = Decode(Body(Input("x", "INT64", "[]", "[5]")));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(As<int64_t>(r->request->inputs[0]), (std::vector<int64_t>{5}));
  auto z = Decode(Body(Input("x", "INT64", "[0,3]", "[]")));
  ASSERT_TRUE(z.ok()) << z.status().message();
  EXPECT_EQ(z->request->inputs[0].data.size(), 0u);
}

// ---- Triton's correlation parameters, as tritonclient.http sends them

// A request with these request-level parameters (a JSON object's members).
Result<DecodedInferRequest> WithParameters(const std::string& members) {
  return Decode(R"({"parameters":{)" + members + R"(},"inputs":[)" + Input("x", "INT32", "[1,1]", "[[1]]") + "]}");
}

TEST(HttpInferRequestDecoder, NumericSequenceIdAndFlags) {
  auto r = WithParameters(R"("sequence_id":1000,"sequence_start":true,"sequence_end":false)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const SequenceParameters& s = r->request->sequence;
  EXPECT_EQ(s.id, 1000u);
  EXPECT_TRUE(s.string_id.empty());
  EXPECT_TRUE(s.start);
  EXPECT_FALSE(s.end);
  EXPECT_TRUE(s.has_id());

  // The whole unsigned 64-bit range (simdjson reads the top half as UINT64).
  auto top = WithParameters(R"("sequence_id":18446744073709551615,"sequence_end":true)");
  ASSERT_TRUE(top.ok()) << top.status().message();
  EXPECT_EQ(top->request->sequence.id, std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(top->request->sequence.end);
  EXPECT_FALSE(top->request->sequence.start);
}

TEST(HttpInferRequestDecoder, StringSequenceId) {
  auto r = WithParameters(R"("sequence_id":"8c6b4e1a-uuid","sequence_start":false,"sequence_end":true)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->request->sequence.string_id, "8c6b4e1a-uuid");
  EXPECT_EQ(r->request->sequence.id, 0u);
  EXPECT_TRUE(r->request->sequence.end);
  // A string of digits stays a string id, as in Triton.
  auto digits = WithParameters(R"("sequence_id":"1002")");
  ASSERT_TRUE(digits.ok()) << digits.status().message();
  EXPECT_EQ(digits->request->sequence.string_id, "1002");
  EXPECT_EQ(digits->request->sequence.id, 0u);
  // 128 characters is Triton's limit, and allowed.
  auto longest = WithParameters(R"("sequence_id":")" + std::string(128, 'q') + R"(","sequence_start":true)");
  ASSERT_TRUE(longest.ok()) << longest.status().message();
  EXPECT_EQ(longest->request->sequence.string_id.size(), 128u);
}

TEST(HttpInferRequestDecoder, NoSequenceIdIsAStatelessRequest) {
  for (const char* members : {R"("priority":1)", R"("sequence_id":0)", R"("sequence_id":"")",
                              R"("sequence_id":0,"sequence_start":false,"sequence_end":false)"}) {
    auto r = WithParameters(members);
    ASSERT_TRUE(r.ok()) << members << ": " << r.status().message();
    EXPECT_FALSE(r->request->sequence.has_id()) << members;
    EXPECT_FALSE(r->request->sequence.start || r->request->sequence.end) << members;
  }
}

TEST(HttpInferRequestDecoder, MalformedSequenceParametersNameTheParameter) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("sequence_id":-5)", "Unable to parse 'sequence_id': expected an unsigned 64-bit integer or a string, "
                              "got a negative number (-5)"},
      {R"("sequence_id":1.5)", "Unable to parse 'sequence_id': expected an unsigned 64-bit integer or a string, "
                               "got a number that is not an integer"},
      {R"("sequence_id":7.0)", "got a number that is not an integer"},
      {R"("sequence_id":true)", "Unable to parse 'sequence_id': expected an unsigned 64-bit integer or a string, "
                                "got a boolean"},
      {R"("sequence_id":null)", "Unable to parse 'sequence_id'"},
      {R"("sequence_id":[1])", "got an array"},
      {R"("sequence_id":{"id":1})", "got an object"},
      {R"("sequence_id":1,"sequence_start":1)",
       "Unable to parse 'sequence_start': expected true or false, got a number"},
      {R"("sequence_id":1,"sequence_end":"yes")",
       "Unable to parse 'sequence_end': expected true or false, got a string"},
      {R"("sequence_id":1,"sequence_start":null)", "Unable to parse 'sequence_start'"},
      // A true flag without an id: nothing could name the sequence later.
      {R"("sequence_id":0,"sequence_start":true)",
       "parameter 'sequence_start' is true but 'sequence_id' is missing, 0 or empty"},
      {R"("sequence_start":true)", "parameter 'sequence_start' is true but 'sequence_id' is missing, 0 or empty"},
      {R"("sequence_id":"","sequence_end":true)",
       "parameter 'sequence_end' is true but 'sequence_id' is missing, 0 or empty"},
      // Both kinds of id at once, or any correlation key twice.
      {R"("sequence_id":1,"sequence_id":"a")", "parameter 'sequence_id' is given more than once"},
      {R"("sequence_id":"a","sequence_id":"a")", "parameter 'sequence_id' is given more than once"},
      {R"("sequence_id":1,"sequence_start":true,"sequence_start":false)",
       "parameter 'sequence_start' is given more than once"},
      {R"("sequence_id":")" + std::string(129, 'q') + R"(")",
       "parameter 'sequence_id': string correlation ID cannot be longer than 128 characters (got 129)"},
  };
  for (const auto& [members, message] : cases) {
    SCOPED_TRACE(members);
    ExpectError(WithParameters(members), 400, message);
  }
}

TEST(HttpInferRequestDecoder, SequenceParametersSitBesideTheOthers) {
  auto r = WithParameters(R"("timeout":20,"sequence_id":7,"priority":3,"sequence_start":true,)"
                          R"("binary_data_output":true,"custom":"kept out","sequence_end":true)");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->request->timeout_us, 20u);
  EXPECT_EQ(r->request->priority, 3u);
  EXPECT_TRUE(r->binary_data_output);
  EXPECT_EQ(r->request->sequence.id, 7u);
  EXPECT_TRUE(r->request->sequence.start && r->request->sequence.end);
}

}  // namespace
}  // namespace ortserve::http
