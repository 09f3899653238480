// Tests of the ONNX Runtime layer against the tiny models that
// tests/data/runtime/make_models.py generates (committed next to it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "runtime/ExecutionProviders.h"
#include "runtime/OrtModelInstance.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ModelPath(const std::string& file) {
  return std::string(ORTSERVE_SOURCE_DIR) + "/tests/data/runtime/" + file;
}

RuntimeOptions CpuOptions(const std::string& file) {
  RuntimeOptions options;
  options.model_path = ModelPath(file);
  options.label = file;
  return options;
}

std::unique_ptr<ModelInstance> Create(const RuntimeOptions& options) {
  auto instance = CreateOrtModelInstance(options);
  EXPECT_TRUE(instance.ok()) << instance.status().message();
  return instance.ok() ? std::move(instance).value() : nullptr;
}

template <typename T>
Tensor MakeTensor(const std::string& name, DataType dtype, Shape shape, const std::vector<T>& values) {
  return Tensor{name, dtype, std::move(shape), TensorData::Copy(values.data(), values.size() * sizeof(T))};
}

template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  std::vector<T> values(tensor.data.size() / sizeof(T));
  std::memcpy(values.data(), tensor.data.data(), values.size() * sizeof(T));
  return values;
}

using testing_util::EncodeStrings;

std::vector<Tensor> AddInputs(const std::vector<float>& a, const std::vector<float>& b) {
  const int64_t batch = static_cast<int64_t>(a.size() / 4);
  return {MakeTensor("a", DataType::kFp32, {batch, 4}, a),
          MakeTensor("b", DataType::kFp32, {batch, 4}, b)};
}

Result<float> RunLoop(ModelInstance& instance, int64_t trip_count) {
  std::vector<Tensor> inputs = {
      MakeTensor("trip_count", DataType::kInt64, {}, std::vector<int64_t>{trip_count}),
      MakeTensor("start", DataType::kFp32, {1}, std::vector<float>{0.0f})};
  std::vector<Tensor> outputs;
  Status status = instance.Run(inputs, &outputs);
  if (!status.ok()) return status;
  return Values<float>(outputs.at(0)).at(0);
}

// ---- InspectModel -------------------------------------------------------------

TEST(InspectModelTest, ReportsNamesTypesAndSymbolicDims) {
  auto signature = InspectModel(ModelPath("add_fp32.onnx"));
  ASSERT_TRUE(signature.ok()) << signature.status().message();
  ASSERT_EQ(signature->inputs.size(), 2u);
  EXPECT_EQ(signature->inputs[0].name, "a");
  EXPECT_EQ(signature->inputs[1].name, "b");
  EXPECT_EQ(signature->inputs[0].dtype, DataType::kFp32);
  EXPECT_THAT(signature->inputs[0].shape, ElementsAre(-1, 4));
  ASSERT_EQ(signature->outputs.size(), 2u);
  EXPECT_EQ(signature->outputs[0].name, "sum");
  EXPECT_EQ(signature->outputs[1].name, "diff");
  EXPECT_THAT(signature->outputs[1].shape, ElementsAre(-1, 4));
}

TEST(InspectModelTest, MapsStringToBytesAndScalarShape) {
  auto strings = InspectModel(ModelPath("identity_string.onnx"));
  ASSERT_TRUE(strings.ok()) << strings.status().message();
  EXPECT_EQ(strings->inputs.at(0).dtype, DataType::kBytes);
  EXPECT_THAT(strings->inputs.at(0).shape, ElementsAre(-1, -1));

  auto loop = InspectModel(ModelPath("slow_loop.onnx"));
  ASSERT_TRUE(loop.ok()) << loop.status().message();
  EXPECT_EQ(loop->inputs.at(0).dtype, DataType::kInt64);
  EXPECT_TRUE(loop->inputs.at(0).shape.empty());
}

TEST(InspectModelTest, UnsupportedElementTypeNamesTensorAndType) {
  auto signature = InspectModel(ModelPath("float8_input.onnx"));
  ASSERT_FALSE(signature.ok());
  EXPECT_EQ(signature.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(signature.status().message(), HasSubstr("'f8'"));
  EXPECT_THAT(signature.status().message(), HasSubstr("float8e4m3fn"));
}

TEST(InspectModelTest, CorruptFileCarriesOrtMessage) {
  auto signature = InspectModel(ModelPath("corrupt.onnx"));
  ASSERT_FALSE(signature.ok());
  EXPECT_THAT(signature.status().message(), HasSubstr("corrupt.onnx"));
  // Our context, then ORT's own explanation after it.
  const std::string& message = signature.status().message();
  EXPECT_GT(message.size(), message.find("': ") + 10) << message;
}

TEST(InspectModelTest, MissingFileFails) {
  auto signature = InspectModel(ModelPath("no_such_model.onnx"));
  ASSERT_FALSE(signature.ok());
  EXPECT_THAT(signature.status().message(), HasSubstr("no_such_model.onnx"));
}

TEST(OrtInfoTest, VersionAndProviders) {
  EXPECT_EQ(OrtVersion().rfind("1.", 0), 0u) << OrtVersion();
  const auto providers = AvailableExecutionProviders();
  EXPECT_NE(std::find(providers.begin(), providers.end(), "CPUExecutionProvider"), providers.end());
}

// ---- Run ------------------------------------------------------------------------

TEST(OrtModelInstanceTest, AddIsNumericallyCorrect) {
  auto instance = Create(CpuOptions("add_fp32.onnx"));
  ASSERT_NE(instance, nullptr);
  EXPECT_THAT(instance->OutputNames(), ElementsAre("sum", "diff"));
  std::vector<Tensor> outputs;
  ASSERT_TRUE(instance->Run(AddInputs({1, 2, 3, 4, 5, 6, 7, 8}, {0.5f, 0.5f, 0.5f, 0.5f, 1, 2, 3, 4}),
                            &outputs)
                  .ok());
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "sum");
  EXPECT_EQ(outputs[0].dtype, DataType::kFp32);
  EXPECT_THAT(outputs[0].shape, ElementsAre(2, 4));
  EXPECT_THAT(Values<float>(outputs[0]), ElementsAre(1.5f, 2.5f, 3.5f, 4.5f, 6, 8, 10, 12));
  EXPECT_EQ(outputs[1].name, "diff");
  EXPECT_THAT(Values<float>(outputs[1]), ElementsAre(0.5f, 1.5f, 2.5f, 3.5f, 4, 4, 4, 4));
}

TEST(OrtModelInstanceTest, OutputsStayValidAfterTheNextRun) {
  auto instance = Create(CpuOptions("add_fp32.onnx"));
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> first;
  ASSERT_TRUE(instance->Run(AddInputs({1, 1, 1, 1}, {1, 1, 1, 1}), &first).ok());
  const std::byte* first_data = first[0].data.data();
  EXPECT_NE(first[0].data.owner(), nullptr);  // views ORT's memory, kept alive by the owner
  for (int i = 0; i < 3; ++i) {
    std::vector<Tensor> next;
    ASSERT_TRUE(instance->Run(AddInputs({5, 5, 5, 5}, {5, 5, 5, 5}), &next).ok());
    EXPECT_THAT(Values<float>(next[0]), ElementsAre(10, 10, 10, 10));
  }
  EXPECT_EQ(first[0].data.data(), first_data);
  EXPECT_THAT(Values<float>(first[0]), ElementsAre(2, 2, 2, 2));
  // An output outlives the instance that produced it.
  instance.reset();
  EXPECT_THAT(Values<float>(first[1]), ElementsAre(0, 0, 0, 0));
}

TEST(OrtModelInstanceTest, UnalignedInputIsStillCorrect) {
  auto instance = Create(CpuOptions("add_fp32.onnx"));
  ASSERT_NE(instance, nullptr);
  for (int64_t batch : {1, 3, 3, 2}) {  // repeated and shrinking sizes reuse the scratch buffer
    std::vector<float> a(static_cast<size_t>(batch) * 4), b(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i);
      b[i] = 100.0f * static_cast<float>(batch);
    }
    auto buffer = std::make_shared<std::vector<std::byte>>(a.size() * sizeof(float) + 1);
    std::memcpy(buffer->data() + 1, a.data(), a.size() * sizeof(float));
    const std::byte* unaligned = buffer->data() + 1;
    ASSERT_NE(reinterpret_cast<uintptr_t>(unaligned) % alignof(float), 0u);
    std::vector<Tensor> inputs = {
        Tensor{"a", DataType::kFp32, {batch, 4}, TensorData(buffer, unaligned, a.size() * 4)},
        MakeTensor("b", DataType::kFp32, {batch, 4}, b)};
    std::vector<Tensor> outputs;
    ASSERT_TRUE(instance->Run(inputs, &outputs).ok());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(Values<float>(outputs[0])[i], a[i] + b[i]);
  }
}

TEST(OrtModelInstanceTest, EmptyBatchRuns) {
  auto instance = Create(CpuOptions("add_fp32.onnx"));
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> outputs;
  Status status = instance->Run(AddInputs({}, {}), &outputs);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_THAT(outputs[0].shape, ElementsAre(0, 4));
  EXPECT_EQ(outputs[0].data.size(), 0u);
}

TEST(OrtModelInstanceTest, BytesRoundTrip) {
  auto instance = Create(CpuOptions("identity_string.onnx"));
  ASSERT_NE(instance, nullptr);
  const std::vector<std::string> strings = {"hello", "", std::string("nul\0inside", 10), "\xff\xfe binary"};
  auto encoded = EncodeStrings(strings);
  std::vector<Tensor> inputs = {Tensor{"input", DataType::kBytes, {2, 2}, TensorData::FromVector(encoded)}};
  std::vector<Tensor> outputs;
  Status status = instance->Run(inputs, &outputs);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(outputs[0].dtype, DataType::kBytes);
  EXPECT_THAT(outputs[0].shape, ElementsAre(2, 2));
  ASSERT_EQ(outputs[0].data.size(), encoded.size());
  EXPECT_EQ(std::memcmp(outputs[0].data.data(), encoded.data(), encoded.size()), 0);
}

struct IdentityCase {
  std::string suffix;
  DataType dtype;
};

class IdentityTest : public ::testing::TestWithParam<IdentityCase> {};

TEST_P(IdentityTest, PassesEveryFixedSizeTypeThroughBitExact) {
  auto instance = Create(CpuOptions("identity_" + GetParam().suffix + ".onnx"));
  ASSERT_NE(instance, nullptr);
  const size_t element_size = DataTypeSize(GetParam().dtype);
  std::vector<std::byte> bytes(2 * 3 * element_size);
  for (size_t i = 0; i < bytes.size(); ++i) {
    // Small values keep every type valid (bool 0/1; no NaN payloads for floats).
    bytes[i] = static_cast<std::byte>(GetParam().dtype == DataType::kBool ? i % 2 : (i * 7) % 61);
  }
  std::vector<Tensor> inputs = {Tensor{"input", GetParam().dtype, {2, 3}, TensorData::FromVector(bytes)}};
  std::vector<Tensor> outputs;
  Status status = instance->Run(inputs, &outputs);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(outputs[0].dtype, GetParam().dtype);
  EXPECT_THAT(outputs[0].shape, ElementsAre(2, 3));
  ASSERT_EQ(outputs[0].data.size(), bytes.size());
  EXPECT_EQ(std::memcmp(outputs[0].data.data(), bytes.data(), bytes.size()), 0);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, IdentityTest,
    ::testing::Values(IdentityCase{"bool", DataType::kBool}, IdentityCase{"uint8", DataType::kUint8},
                      IdentityCase{"uint16", DataType::kUint16}, IdentityCase{"uint32", DataType::kUint32},
                      IdentityCase{"uint64", DataType::kUint64}, IdentityCase{"int8", DataType::kInt8},
                      IdentityCase{"int16", DataType::kInt16}, IdentityCase{"int32", DataType::kInt32},
                      IdentityCase{"int64", DataType::kInt64}, IdentityCase{"fp16", DataType::kFp16},
                      IdentityCase{"fp32", DataType::kFp32}, IdentityCase{"fp64", DataType::kFp64},
                      IdentityCase{"bf16", DataType::kBf16}),
    [](const auto& info) { return info.param.suffix; });

// ---- input validation -----------------------------------------------------------

TEST(OrtModelInstanceTest, RejectsBadInputsWithNames) {
  auto instance = Create(CpuOptions("add_fp32.onnx"));
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> outputs;

  auto wrong_type = AddInputs({1, 2, 3, 4}, {1, 2, 3, 4});
  wrong_type[1] = MakeTensor("b", DataType::kInt32, {1, 4}, std::vector<int32_t>{1, 2, 3, 4});
  Status status = instance->Run(wrong_type, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'b' expects data type FP32, got INT32"));

  auto missing = AddInputs({1, 2, 3, 4}, {1, 2, 3, 4});
  missing.pop_back();
  status = instance->Run(missing, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'b' is missing"));

  auto unknown = AddInputs({1, 2, 3, 4}, {1, 2, 3, 4});
  unknown.push_back(MakeTensor("c", DataType::kFp32, {1}, std::vector<float>{1}));
  status = instance->Run(unknown, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("no input named 'c'"));

  auto duplicate = AddInputs({1, 2, 3, 4}, {1, 2, 3, 4});
  duplicate[1].name = "a";
  status = instance->Run(duplicate, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);

  auto short_data = AddInputs({1, 2, 3, 4}, {1, 2, 3, 4});
  short_data[0].shape = {2, 4};
  status = instance->Run(short_data, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("needs 32 bytes, got 16"));

  // Byte size fits, but the shape breaks the model's fixed dim: ORT says so.
  auto bad_shape = AddInputs({1, 2, 3, 4}, {1, 2, 3, 4});
  bad_shape[0].shape = bad_shape[1].shape = {2, 2};
  status = instance->Run(bad_shape, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.message();
  EXPECT_TRUE(outputs.empty());

  // The instance is still usable after every rejection.
  ASSERT_TRUE(instance->Run(AddInputs({1, 2, 3, 4}, {1, 2, 3, 4}), &outputs).ok());
  EXPECT_THAT(Values<float>(outputs[0]), ElementsAre(2, 4, 6, 8));
}

TEST(OrtModelInstanceTest, RejectsMalformedBytes) {
  auto instance = Create(CpuOptions("identity_string.onnx"));
  ASSERT_NE(instance, nullptr);
  auto encoded = EncodeStrings({"abc", "de"});
  encoded.pop_back();  // last element's prefix now runs past the end
  std::vector<Tensor> inputs = {Tensor{"input", DataType::kBytes, {1, 2}, TensorData::FromVector(encoded)}};
  std::vector<Tensor> outputs;
  Status status = instance->Run(inputs, &outputs);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("'input'"));
}

// ---- loading and execution providers -----------------------------------------------

TEST(CreateOrtModelInstanceTest, CorruptFileCarriesOrtMessage) {
  auto instance = CreateOrtModelInstance(CpuOptions("corrupt.onnx"));
  ASSERT_FALSE(instance.ok());
  EXPECT_THAT(instance.status().message(), HasSubstr("corrupt.onnx"));
}

TEST(CreateOrtModelInstanceTest, UnknownProviderFailsStrictly) {
  RuntimeOptions options = CpuOptions("add_fp32.onnx");
  options.execution_providers = {{"warp_drive", {}}, {"cpu", {}}};
  auto strict = CreateOrtModelInstance(options);
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(), HasSubstr("warp_drive"));

  options.allow_fallback = true;
  auto fallback = CreateOrtModelInstance(options);
  ASSERT_TRUE(fallback.ok()) << fallback.status().message();
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*fallback)->Run(AddInputs({1, 2, 3, 4}, {1, 1, 1, 1}), &outputs).ok());
  EXPECT_THAT(Values<float>(outputs[0]), ElementsAre(2, 3, 4, 5));
}

TEST(CreateOrtModelInstanceTest, UnavailableCudaFailsStrictlyAndFallsBackWhenAllowed) {
  const auto providers = AvailableExecutionProviders();
  if (std::find(providers.begin(), providers.end(), "CUDAExecutionProvider") != providers.end() ||
      std::filesystem::exists(OrtLibraryDir() + "/libonnxruntime_providers_cuda.so"))
    GTEST_SKIP() << "this ONNX Runtime build has CUDA (runtime_gpu_options_test covers both cases)";
  RuntimeOptions options = CpuOptions("add_fp32.onnx");
  options.execution_providers = {{"cuda", {{"device_id", "0"}}}, {"cpu", {}}};
  auto strict = CreateOrtModelInstance(options);
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(), HasSubstr("CUDAExecutionProvider is not available"));

  options.allow_fallback = true;
  auto fallback = CreateOrtModelInstance(options);
  EXPECT_TRUE(fallback.ok()) << fallback.status().message();
}

TEST(CreateOrtModelInstanceTest, ProviderAfterCpuIsAConfigError) {
  RuntimeOptions options = CpuOptions("add_fp32.onnx");
  options.execution_providers = {{"cpu", {}}, {"cuda", {}}};
  options.allow_fallback = true;
  auto instance = CreateOrtModelInstance(options);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
}

TEST(CreateOrtModelInstanceTest, AppliesEverySessionOption) {
  RuntimeOptions options = CpuOptions("add_fp32.onnx");
  options.intra_op_threads = 2;
  options.inter_op_threads = 2;
  options.allow_spinning = true;
  options.execution_mode = ExecutionMode::kParallel;
  options.enable_mem_arena = false;
  options.enable_mem_pattern = false;
  options.graph_optimization_level = GraphOptimizationLevel::kDisabled;
  auto instance = Create(options);
  ASSERT_NE(instance, nullptr);
  std::vector<Tensor> outputs;
  ASSERT_TRUE(instance->Run(AddInputs({1, 2, 3, 4}, {4, 3, 2, 1}), &outputs).ok());
  EXPECT_THAT(Values<float>(outputs[0]), ElementsAre(5, 5, 5, 5));

  options.intra_op_threads = -1;
  EXPECT_FALSE(CreateOrtModelInstance(options).ok());
}

TEST(CreateOrtModelInstanceTest, UnsupportedTypeFailsTheLoad) {
  auto instance = CreateOrtModelInstance(CpuOptions("float8_input.onnx"));
  ASSERT_FALSE(instance.ok());
  EXPECT_THAT(instance.status().message(), HasSubstr("float8e4m3fn"));
}

// ---- Terminate --------------------------------------------------------------------

TEST(OrtModelInstanceTerminateTest, TerminateWithoutRunIsIgnored) {
  auto instance = Create(CpuOptions("slow_loop.onnx"));
  ASSERT_NE(instance, nullptr);
  instance->Terminate();
  auto count = RunLoop(*instance, 5);
  ASSERT_TRUE(count.ok()) << count.status().message();
  EXPECT_EQ(*count, 5.0f);
}

TEST(OrtModelInstanceTerminateTest, TerminateStopsARunInProgress) {
  auto instance = Create(CpuOptions("slow_loop.onnx"));
  ASSERT_NE(instance, nullptr);
  // ~1 us per iteration: minutes of work unless ORT stops between iterations.
  auto run = std::async(std::launch::async, [&] { return RunLoop(*instance, 100'000'000); });
  // Terminate before the Run has started is ignored by design, so keep asking
  // until the Run returns. No timing is asserted.
  while (run.wait_for(std::chrono::milliseconds(2)) != std::future_status::ready) instance->Terminate();
  auto result = run.get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  // ORT aborted the run (as opposed to finishing it and having it discarded).
  EXPECT_THAT(result.status().message(), HasSubstr("was terminated: "));

  // The next Run is not affected by the earlier Terminate.
  auto count = RunLoop(*instance, 3);
  ASSERT_TRUE(count.ok()) << count.status().message();
  EXPECT_EQ(*count, 3.0f);
}

}  // namespace
}  // namespace ortserve
