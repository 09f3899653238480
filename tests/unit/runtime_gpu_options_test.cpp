// GPU RuntimeOptions on the runtime: strict failure without CUDA, loud
// fallback when allowed, option consistency checks. The tests that need a
// CUDA device skip with the reason when this machine or ORT build lacks it
// (on a GPU machine: docs/gpu.md, "Checking on a GPU machine"; the GPU
// bundle carries this test, bench/gpu/gpu_checks.py runs it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/ExecutionProviders.h"
#include "runtime/OrtModelInstance.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

RuntimeOptions AddModel() {
  RuntimeOptions options;
  options.model_path = std::string(ORTSERVE_SOURCE_DIR) + "/tests/data/runtime/add_fp32.onnx";
  options.label = "add:1#0";
  return options;
}

RuntimeOptions GpuAddModel(bool io_binding, bool cuda_graph) {
  RuntimeOptions options = AddModel();
  options.execution_providers = {{"cuda", {{"device_id", "0"}}}};
  if (cuda_graph) options.execution_providers[0].options.emplace_back("enable_cuda_graph", "1");
  options.io_binding = io_binding;
  options.cuda_graph = cuda_graph;
  return options;
}

std::vector<Tensor> AddInputs(int64_t batch, float offset) {
  std::vector<float> a(batch * 4), b(batch * 4);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = offset + static_cast<float>(i);
    b[i] = 0.5f * static_cast<float>(i);
  }
  return {Tensor{"a", DataType::kFp32, {batch, 4}, TensorData::Copy(a.data(), a.size() * 4)},
          Tensor{"b", DataType::kFp32, {batch, 4}, TensorData::Copy(b.data(), b.size() * 4)}};
}

using testing_util::Floats;

bool GpuProvidersInstalled() {
  std::error_code ec;
  return std::filesystem::exists(OrtLibraryDir() + "/libonnxruntime_providers_cuda.so", ec);
}

// Empty when a strict CUDA instance can be created here; else why not.
std::string CudaUnavailableReason() {
  auto probe = CreateOrtModelInstance(GpuAddModel(false, false));
  return probe.ok() ? std::string() : probe.status().message();
}

TEST(GpuOptionsWithoutCuda, StrictCudaInstanceFailsWithAClearReason) {
  if (CudaUnavailableReason().empty()) GTEST_SKIP() << "CUDA works here; this test is for machines without it";
  for (bool graph : {false, true}) {
    auto instance = CreateOrtModelInstance(GpuAddModel(true, graph));
    ASSERT_FALSE(instance.ok());
    EXPECT_EQ(instance.status().code(), StatusCode::kUnavailable);
    EXPECT_THAT(instance.status().message(), HasSubstr("CUDAExecutionProvider is not available"));
    EXPECT_THAT(instance.status().message(), HasSubstr("add:1#0"));
    if (!GpuProvidersInstalled()) {
      EXPECT_THAT(instance.status().message(), HasSubstr("is not available in this ONNX Runtime build"));
      EXPECT_THAT(instance.status().message(), HasSubstr("make gpu-deps"));
    }
  }
}

TEST(GpuOptionsWithoutCuda, StrictTensorRtInstanceFails) {
  if (CudaUnavailableReason().empty()) GTEST_SKIP() << "CUDA works here; this test is for machines without it";
  RuntimeOptions options = GpuAddModel(true, false);
  options.execution_providers.insert(options.execution_providers.begin(),
                                     {"tensorrt", {{"device_id", "0"}, {"trt_fp16_enable", "1"}}});
  auto instance = CreateOrtModelInstance(options);
  ASSERT_FALSE(instance.ok());
  EXPECT_THAT(instance.status().message(), HasSubstr("TensorrtExecutionProvider"));
}

TEST(GpuOptionsWithoutCuda, AllowedFallbackRunsOnCpuIgnoringGpuSwitches) {
  if (CudaUnavailableReason().empty()) GTEST_SKIP() << "CUDA works here; this test is for machines without it";
  RuntimeOptions options = GpuAddModel(true, true);
  options.numerical_check = NumericalCheck::kEnforce;
  options.allow_fallback = true;
  auto instance = CreateOrtModelInstance(options);
  ASSERT_TRUE(instance.ok()) << instance.status().message();
  for (int64_t batch : {1, 3, 1}) {
    std::vector<Tensor> outputs;
    ASSERT_TRUE((*instance)->Run(AddInputs(batch, 1.0f), &outputs).ok());
    ASSERT_EQ(outputs.size(), 2u);  // sum, diff
    EXPECT_EQ(outputs[0].shape, (Shape{batch, 4}));
    EXPECT_EQ(Floats(outputs[0])[1], 1.0f + 1.0f + 0.5f);
  }
  (*instance)->FinishWarmup();
}

TEST(GpuOptions, CudaGraphsWithoutIoBindingIsAConfigError) {
  RuntimeOptions options = GpuAddModel(false, true);
  options.allow_fallback = true;  // checked before any provider is tried
  auto instance = CreateOrtModelInstance(options);
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(), HasSubstr("CUDA graphs need IOBinding"));
}

TEST(GpuOptions, CpuInstanceIgnoresFinishWarmupAndGpuSwitches) {
  RuntimeOptions options = AddModel();
  options.io_binding = true;  // no GPU provider requested: plain CPU path
  auto instance = CreateOrtModelInstance(options);
  ASSERT_TRUE(instance.ok()) << instance.status().message();
  (*instance)->FinishWarmup();
  std::vector<Tensor> outputs;
  ASSERT_TRUE((*instance)->Run(AddInputs(1, 0.0f), &outputs).ok());
  EXPECT_THAT(Floats(outputs[0]), ElementsAre(0.0f, 1.5f, 3.0f, 4.5f));
}

TEST(GpuOptions, OrtLibraryDirHoldsLibonnxruntime) {
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::exists(OrtLibraryDir() + "/libonnxruntime.so.1", ec) ||
              std::filesystem::exists(OrtLibraryDir() + "/libonnxruntime.so", ec))
      << OrtLibraryDir();
}

// ---- on a machine with CUDA ----------------------------------------------------

class GpuInstanceTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  void SetUp() override {
    const std::string reason = CudaUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << "no usable CUDA here: " << reason;
  }
};

TEST_P(GpuInstanceTest, MatchesCpuAcrossBatchSizesWithNumericalCheck) {
  const auto [io_binding, cuda_graph] = GetParam();
  RuntimeOptions options = GpuAddModel(io_binding, cuda_graph);
  options.numerical_check = NumericalCheck::kEnforce;
  options.numerical_tolerance = 1e-5;
  options.cuda_graph_max_shapes = 2;  // the third batch size runs uncaptured
  auto gpu = CreateOrtModelInstance(options);
  ASSERT_TRUE(gpu.ok()) << gpu.status().message();
  auto cpu = CreateOrtModelInstance(AddModel());
  ASSERT_TRUE(cpu.ok());
  std::vector<Tensor> kept;  // outputs must stay valid after later runs
  std::vector<std::vector<float>> kept_values;
  for (int round = 0; round < 4; ++round) {
    for (int64_t batch : {1, 4, 7}) {
      const auto inputs = AddInputs(batch, static_cast<float>(round));
      std::vector<Tensor> got, want;
      ASSERT_TRUE((*gpu)->Run(inputs, &got).ok()) << "batch " << batch << " round " << round;
      ASSERT_TRUE((*cpu)->Run(inputs, &want).ok());
      ASSERT_EQ(got.size(), 2u);
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_EQ(got[k].name, want[k].name);
        EXPECT_EQ(got[k].shape, want[k].shape);
        EXPECT_EQ(Floats(got[k]), Floats(want[k])) << "batch " << batch << " round " << round;
      }
      kept.push_back(got[0]);
      kept_values.push_back(Floats(want[0]));
    }
    if (round == 1) (*gpu)->FinishWarmup();
  }
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(Floats(kept[i]), kept_values[i]) << "kept output " << i;
}

INSTANTIATE_TEST_SUITE_P(IoBindingAndCudaGraphs, GpuInstanceTest,
                         ::testing::Values(std::make_tuple(false, false), std::make_tuple(true, false),
                                           std::make_tuple(true, true)));

}  // namespace
}  // namespace ortserve
