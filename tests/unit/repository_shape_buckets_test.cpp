// Shape buckets: the config's parameters parsed and checked, the bucket
// chosen, requests padded, outputs cropped, and warm-up per bucket.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "config/ConfigParse.h"
#include "config/RuntimeConfig.h"
#include "repository/Warmup.h"
#include "serving/ResponseCache.h"
#include "serving/ShapeBuckets.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

using testing_util::Floats;
using testing_util::Fp32;

// A BERT-shaped model: token ids and mask [batch, seq], a per-token output
// [batch, seq, hidden] and a pooled one [batch, hidden].
const char* kModel = R"(
  name: "bert"
  max_batch_size: 8
  input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
          { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] },
          { name: "scale" data_type: TYPE_FP32 dims: [ 1 ] } ]
  output [ { name: "tokens" data_type: TYPE_FP32 dims: [ -1, 2 ] },
           { name: "pooled" data_type: TYPE_FP32 dims: [ 2 ] } ]
)";

inference::ModelConfig Config(const std::string& parameters, const char* model = kModel) {
  auto c = ParseModelConfig(std::string(model) + parameters);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? c.value() : inference::ModelConfig();
}

std::string Parameter(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}

const std::string kBuckets = Parameter("shape_buckets", "4,8") + Parameter("bucket_pad", "input_ids:7") +
                             Parameter("bucket_mask", "attention_mask") + Parameter("bucket_outputs", "tokens");

ShapeBuckets Buckets(const std::string& parameters = kBuckets) {
  auto b = ShapeBuckets::FromConfig(Config(parameters));
  EXPECT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(b.ok() && b.value());
  return std::move(*b.value());
}

// The error FromConfig gives for `parameters`.
std::string ErrorOf(const std::string& parameters, const char* model = kModel) {
  auto b = ShapeBuckets::FromConfig(Config(parameters, model));
  EXPECT_FALSE(b.ok());
  return b.ok() ? std::string() : b.status().message();
}

Tensor Int64(const std::string& name, Shape shape, const std::vector<int64_t>& values) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kInt64;
  t.shape = std::move(shape);
  t.data = TensorData::Copy(values.data(), values.size() * sizeof(int64_t));
  return t;
}

std::vector<int64_t> Int64s(const Tensor& t) {
  std::vector<int64_t> v(t.data.size() / sizeof(int64_t));
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

InferenceRequest TextRequest(const std::vector<std::vector<int64_t>>& rows) {
  InferenceRequest r;
  const int64_t batch = static_cast<int64_t>(rows.size());
  const int64_t length = static_cast<int64_t>(rows[0].size());
  std::vector<int64_t> ids;
  for (const auto& row : rows) ids.insert(ids.end(), row.begin(), row.end());
  r.inputs.push_back(Int64("input_ids", {batch, length}, ids));
  r.inputs.push_back(Int64("attention_mask", {batch, length}, std::vector<int64_t>(ids.size(), 1)));
  r.inputs.push_back(Fp32("scale", {batch, 1}, std::vector<float>(rows.size(), 1.0f)));
  return r;
}

TEST(ShapeBucketsConfig, NoneWithoutShapeBuckets) {
  auto b = ShapeBuckets::FromConfig(Config(""));
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b.value());
}

TEST(ShapeBucketsConfig, ParsesEveryField) {
  const ShapeBuckets b = Buckets(kBuckets + Parameter("bucket_overflow", "reject"));
  EXPECT_EQ(b.sizes(), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(b.axis(), 1u);
  ASSERT_NE(b.FindPadded("input_ids"), nullptr);
  int64_t pad = 0;
  std::memcpy(&pad, b.FindPadded("input_ids")->pad.data(), sizeof pad);
  EXPECT_EQ(pad, 7);
  ASSERT_NE(b.FindPadded("attention_mask"), nullptr);
  EXPECT_EQ(b.FindPadded("attention_mask")->pad, std::vector<std::byte>(8));
  EXPECT_EQ(b.FindPadded("scale"), nullptr);
  EXPECT_TRUE(IsKnownParameter("bucket_overflow"));
}

TEST(ShapeBucketsConfig, ErrorsNameTheField) {
  const std::string pad = Parameter("bucket_pad", "input_ids:0");
  EXPECT_NE(ErrorOf(Parameter("shape_buckets", "8,4") + pad).find("'shape_buckets' value '8,4'"), std::string::npos);
  EXPECT_NE(ErrorOf(Parameter("shape_buckets", "4,,8") + pad).find("'shape_buckets'"), std::string::npos);
  EXPECT_NE(ErrorOf(Parameter("shape_buckets", "0") + pad).find("bucket '0'"), std::string::npos);
  EXPECT_NE(ErrorOf(Parameter("shape_buckets", "4")).find("'bucket_pad' and/or 'bucket_mask'"), std::string::npos);
  EXPECT_NE(ErrorOf(pad).find("parameter 'bucket_pad' needs parameter 'shape_buckets'"), std::string::npos);
  const std::string on = Parameter("shape_buckets", "4,8");
  EXPECT_NE(ErrorOf(on + Parameter("bucket_pad", "nope:0")).find("input 'nope' is not in the config"),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + Parameter("bucket_pad", "scale:0")).find("input 'scale' has dims [1]: its dim 0"),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + Parameter("bucket_pad", "input_ids")).find("expected \"<input>:<pad value>\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + Parameter("bucket_pad", "input_ids:1.5")).find("the pad value is not a INT64"),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + Parameter("bucket_pad", "input_ids:0,input_ids:1")).find("listed twice"),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + pad + Parameter("bucket_mask", "input_ids")).find("also in 'bucket_pad'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + pad + Parameter("bucket_outputs", "pooled")).find("output 'pooled' has dims [2]"),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + pad + Parameter("bucket_outputs", "missing")).find("output 'missing' is not in the config"),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + pad + Parameter("bucket_overflow", "drop")).find("'bucket_overflow' value 'drop'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(on + pad + Parameter("bucket_dim", "-1")).find("'bucket_dim' value '-1'"), std::string::npos);
  EXPECT_NE(ErrorOf(on + pad + Parameter("bucket_dim", "1")).find("its dim 1 (bucket_dim)"), std::string::npos);
  const char* unbatched = R"(name: "m" input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1, -1 ] } ])";
  EXPECT_NE(ErrorOf(on + pad, unbatched).find("needs max_batch_size > 0"), std::string::npos);
  const char* strings = R"(name: "m" max_batch_size: 2
    input [ { name: "input_ids" data_type: TYPE_STRING dims: [ -1 ] } ])";
  EXPECT_NE(ErrorOf(on + pad, strings).find("is BYTES"), std::string::npos);
}

TEST(ShapeBucketsConfig, BatchesAreGroupedByShapeOnlyWithBuckets) {
  auto with = MakeDynamicBatcherOptions(Config(kBuckets + "dynamic_batching { }"), "1");
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_TRUE(with.value().batching.group_by_shape);
  auto without = MakeDynamicBatcherOptions(Config("dynamic_batching { }"), "1");
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(without.value().batching.group_by_shape);
}

TEST(ShapeBucketsConfig, PadValuesFollowTheDataType) {
  const char* model = R"(name: "m" max_batch_size: 2
    input [ { name: "u8" data_type: TYPE_UINT8 dims: [ -1 ] },
            { name: "f32" data_type: TYPE_FP32 dims: [ -1 ] },
            { name: "flag" data_type: TYPE_BOOL dims: [ -1 ] } ])";
  const std::string on = Parameter("shape_buckets", "4");
  auto b = ShapeBuckets::FromConfig(Config(on + Parameter("bucket_pad", "u8:255, f32:-1.5, flag:true"), model));
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b.value()->FindPadded("u8")->pad, std::vector<std::byte>{std::byte{255}});
  float f = 0;
  std::memcpy(&f, b.value()->FindPadded("f32")->pad.data(), sizeof f);
  EXPECT_EQ(f, -1.5f);
  EXPECT_EQ(b.value()->FindPadded("flag")->pad, std::vector<std::byte>{std::byte{1}});
  EXPECT_NE(ErrorOf(on + Parameter("bucket_pad", "u8:256"), model).find("not a UINT8"), std::string::npos);
  EXPECT_NE(ErrorOf(on + Parameter("bucket_pad", "flag:2"), model).find("not a BOOL"), std::string::npos);
}

TEST(ShapeBuckets, ChoosesTheSmallestBucketThatFits) {
  const ShapeBuckets b = Buckets();
  EXPECT_EQ(b.BucketFor(0), 4);
  EXPECT_EQ(b.BucketFor(1), 4);
  EXPECT_EQ(b.BucketFor(4), 4);
  EXPECT_EQ(b.BucketFor(5), 8);
  EXPECT_EQ(b.BucketFor(8), 8);
  EXPECT_EQ(b.BucketFor(9), std::nullopt);
}

TEST(ShapeBuckets, PadsEveryRowOfThePaddedInputs) {
  InferenceRequest r = TextRequest({{1, 2, 3}, {4, 5, 6}});
  ASSERT_TRUE(Buckets().Pad(&r).ok());
  EXPECT_EQ(r.unpadded_length, 3);
  EXPECT_EQ(r.inputs[0].shape, (Shape{2, 4}));
  EXPECT_EQ(Int64s(r.inputs[0]), (std::vector<int64_t>{1, 2, 3, 7, 4, 5, 6, 7}));
  EXPECT_EQ(r.inputs[1].shape, (Shape{2, 4}));
  EXPECT_EQ(Int64s(r.inputs[1]), (std::vector<int64_t>{1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(r.inputs[2].shape, (Shape{2, 1}));  // not bucketed: untouched
}

TEST(ShapeBuckets, LeavesARequestThatIsABucketAsItIs) {
  InferenceRequest r = TextRequest({{1, 2, 3, 4}});
  const std::byte* before = r.inputs[0].data.data();
  ASSERT_TRUE(Buckets().Pad(&r).ok());
  EXPECT_EQ(r.unpadded_length, -1);
  EXPECT_EQ(r.inputs[0].data.data(), before);
}

TEST(ShapeBuckets, OverTheLargestBucketRunsAloneOrIsRefused) {
  InferenceRequest alone = TextRequest({std::vector<int64_t>(9, 1)});
  ASSERT_TRUE(Buckets().Pad(&alone).ok());
  EXPECT_EQ(alone.inputs[0].shape, (Shape{1, 9}));
  EXPECT_EQ(alone.unpadded_length, -1);

  InferenceRequest refused = TextRequest({std::vector<int64_t>(9, 1)});
  Status st = Buckets(kBuckets + Parameter("bucket_overflow", "reject")).Pad(&refused);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("length 9"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("largest shape bucket 8"), std::string::npos) << st.message();
}

TEST(ShapeBuckets, PaddedInputsMustAgreeOnTheLength) {
  InferenceRequest r = TextRequest({{1, 2, 3}});
  r.inputs[1] = Int64("attention_mask", {1, 2}, {1, 1});
  Status st = Buckets().Pad(&r);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'input_ids' and 'attention_mask'"), std::string::npos) << st.message();
}

TEST(ShapeBuckets, CropsTheBucketedOutputsBack) {
  InferenceRequest r;
  r.unpadded_length = 3;
  InferenceResponse response;
  response.outputs.push_back(Fp32("tokens", {1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}));
  response.outputs.push_back(Fp32("pooled", {1, 2}, {9, 10}));
  ASSERT_TRUE(Buckets().Crop(r, &response).ok());
  EXPECT_EQ(response.outputs[0].shape, (Shape{1, 3, 2}));
  EXPECT_EQ(Floats(response.outputs[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(response.outputs[1].shape, (Shape{1, 2}));

  InferenceResponse wrong;
  wrong.outputs.push_back(Fp32("tokens", {1, 8, 1}, std::vector<float>(8)));
  EXPECT_EQ(Buckets().Crop(r, &wrong).code(), StatusCode::kInternal);
}

TEST(ShapeBuckets, CropCopiesOnlyWhenRowsPrecedeTheAxis) {
  const Tensor one = Fp32("t", {1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor view = ShapeBuckets::CropTensor(one, 1, 2);
  EXPECT_EQ(view.data.data(), one.data.data());
  EXPECT_EQ(Floats(view), (std::vector<float>{1, 2, 3, 4}));
  const Tensor two = Fp32("t", {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor copy = ShapeBuckets::CropTensor(two, 1, 1);
  EXPECT_EQ(copy.shape, (Shape{2, 1}));
  EXPECT_EQ(Floats(copy), (std::vector<float>{1, 4}));
}

TEST(ShapeBuckets, PadThenCropGivesTheInputBack) {
  const Tensor t = Fp32("t", {2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  std::vector<std::byte> pad(4);
  const float minus = -1.0f;
  std::memcpy(pad.data(), &minus, 4);
  const Tensor padded = ShapeBuckets::PadTensor(t, 1, 5, pad);
  EXPECT_EQ(padded.shape, (Shape{2, 5, 2}));
  EXPECT_EQ(Floats(padded), (std::vector<float>{1, 2, 3, 4, 5, 6, -1, -1, -1, -1,  //
                                                7, 8, 9, 10, 11, 12, -1, -1, -1, -1}));
  const Tensor back = ShapeBuckets::CropTensor(padded, 1, 3);
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(Floats(back), Floats(t));
}

TEST(ShapeBuckets, CacheKeysTellPaddedLengthsApart) {
  // Length 3 ending in the pad value and length 2 pad to the same inputs.
  InferenceRequest three = TextRequest({{1, 2, 7}});
  three.inputs[1] = Int64("attention_mask", {1, 3}, {1, 1, 0});
  InferenceRequest two = TextRequest({{1, 2}});
  ASSERT_TRUE(Buckets().Pad(&three).ok());
  ASSERT_TRUE(Buckets().Pad(&two).ok());
  EXPECT_EQ(Int64s(three.inputs[0]), Int64s(two.inputs[0]));
  EXPECT_EQ(Int64s(three.inputs[1]), Int64s(two.inputs[1]));
  EXPECT_NE(ResponseCache::KeyOf(1, three).bytes, ResponseCache::KeyOf(1, two).bytes);
}

TEST(ShapeBuckets, WarmUpCoversEveryBucketAtEveryBatchSize) {
  const std::string batching = "dynamic_batching { preferred_batch_size: [ 2 ] }";
  auto samples = BuildWarmupSamples(Config(kBuckets + batching), "/nonexistent");
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  // Batch sizes 1, 2, 8; buckets 4, 8.
  ASSERT_EQ(samples.value().size(), 6u);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const WarmupSample& s : samples.value()) {
    for (const Tensor& t : s.inputs) {
      if (t.name == "input_ids" || t.name == "attention_mask") seen.insert({t.shape[0], t.shape[1]});
    }
    EXPECT_NE(s.name.find(" bucket "), std::string::npos) << s.name;
  }
  EXPECT_EQ(seen, (std::set<std::pair<int64_t, int64_t>>{{1, 4}, {1, 8}, {2, 4}, {2, 8}, {8, 4}, {8, 8}}));
}

TEST(ShapeBuckets, AConfiguredWarmUpSampleRunsAtEveryBucketItFits) {
  const std::string warmup = R"(
    model_warmup { name: "five" batch_size: 2
      inputs { key: "input_ids" value { data_type: TYPE_INT64 dims: [ 5 ] random_data: true } }
      inputs { key: "attention_mask" value { data_type: TYPE_INT64 dims: [ 5 ] zero_data: true } }
      inputs { key: "scale" value { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true } } })";
  auto samples = BuildWarmupSamples(Config(kBuckets + warmup), "/nonexistent");
  ASSERT_TRUE(samples.ok()) << samples.status().message();
  ASSERT_EQ(samples.value().size(), 1u);  // 5 fits bucket 8 only
  const WarmupSample& s = samples.value()[0];
  EXPECT_EQ(s.name, "five bucket 8");
  auto ids_tensor =
      std::find_if(s.inputs.begin(), s.inputs.end(), [](const Tensor& t) { return t.name == "input_ids"; });
  ASSERT_NE(ids_tensor, s.inputs.end());
  EXPECT_EQ(ids_tensor->shape, (Shape{2, 8}));
  const std::vector<int64_t> ids = Int64s(*ids_tensor);
  EXPECT_EQ(ids[5], 7);  // padded with input_ids' pad value
  EXPECT_EQ(ids[15], 7);
}

}  // namespace
}  // namespace ortserve
