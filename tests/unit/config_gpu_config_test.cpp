// Model config (Triton's terms) -> GPU RuntimeOptions: instance groups,
// TensorRT accelerator, CUDA provider parameters, fallback, CUDA graphs,
// numerical check, cache paths, and the errors for bad values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "config/ConfigAutoComplete.h"
#include "config/ConfigChecks.h"
#include "config/ConfigParse.h"
#include "config/ConfigRules.h"
#include "config/ConfigTypes.h"
#include "config/GpuConfig.h"
#include "config/RuntimeConfig.h"

#include "ParsedConfig.h"

namespace ortserve {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Pair;

Status ReadError(const std::string& text) {
  auto gpu = ReadGpuSettings(Parse(text));
  EXPECT_FALSE(gpu.ok()) << text;
  return gpu.ok() ? Status::Ok() : gpu.status();
}

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}

std::string Trt(const std::string& params) {
  return "optimization { execution_accelerators { gpu_execution_accelerator: [ { name: \"tensorrt\" " + params +
         " } ] } }";
}

std::string TrtParam(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value: \"" + value + "\" } ";
}

const ExecutionProviderOptions* Provider(const RuntimeOptions& o, const std::string& name) {
  for (const auto& p : o.execution_providers)
    if (p.name == name) return &p;
  return nullptr;
}

RuntimeOptions GpuOptions(const std::string& text, int device = 0, const std::string& cache_root = "/cache") {
  auto config = Parse(text);
  auto settings = ReadSessionSettings(config);
  EXPECT_TRUE(settings.ok()) << settings.status().message();
  return MakeRuntimeOptions(settings.ok() ? settings.value() : OrtSessionSettings(), 2, {true, device},
                            "/repo/m/3/model.onnx", "m:3#0", cache_root);
}

TEST(GpuInstanceGroups, CountInstancesPerListedGpuWithDeviceIds) {
  auto specs = ExpandInstanceGroups(Parse("instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] count: 3 } ]"));
  ASSERT_TRUE(specs.ok());
  ASSERT_EQ(specs->size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE((*specs)[i].gpu);
    EXPECT_EQ((*specs)[i].device_id, i < 3 ? 0 : 1);
  }
  auto no_gpus = ExpandInstanceGroups(Parse("instance_group [ { kind: KIND_GPU count: 2 } ]"));
  ASSERT_TRUE(no_gpus.ok());
  ASSERT_EQ(no_gpus->size(), 2u);
  EXPECT_EQ((*no_gpus)[1].device_id, 0);
}

TEST(GpuInstanceGroups, CpuGroupListingGpusIsRefusedInTritonsWords) {
  const Status refused = CheckInstanceGroupGpus(
      Parse("name: \"m\" instance_group [ { name: \"m_0\" kind: KIND_CPU gpus: [ 0 ] } ]"), /*cuda_provider=*/true);
  EXPECT_EQ(refused.message(), "instance group m_0 of model m has kind KIND_CPU but specifies one or more GPUs");
}

TEST(GpuRuntimeOptions, DefaultsAreStrictCudaWithIoBinding) {
  RuntimeOptions o = GpuOptions("name: \"m\"", 1);
  ASSERT_EQ(o.execution_providers.size(), 1u);
  EXPECT_EQ(o.execution_providers[0].name, "cuda");
  EXPECT_THAT(o.execution_providers[0].options, Contains(Pair("device_id", "1")));
  EXPECT_EQ(o.device_id, 1);
  EXPECT_FALSE(o.allow_fallback);
  EXPECT_TRUE(o.io_binding);
  EXPECT_FALSE(o.cuda_graph);
  EXPECT_EQ(o.numerical_check, NumericalCheck::kOff);
  EXPECT_EQ(o.intra_op_threads, 2);

  // A CPU instance of the same config gets none of it.
  auto settings = ReadSessionSettings(Parse("name: \"m\"" + Param("enable_cuda_graph", "1")));
  ASSERT_TRUE(settings.ok());
  RuntimeOptions cpu = MakeRuntimeOptions(settings.value(), 1, {false, 0}, "/repo/m/3/model.onnx", "m:3#0");
  EXPECT_TRUE(cpu.execution_providers.empty());
  EXPECT_FALSE(cpu.io_binding);
  EXPECT_FALSE(cpu.cuda_graph);
}

TEST(GpuRuntimeOptions, TensorRtAcceleratorComesFirstWithItsOptions) {
  RuntimeOptions o = GpuOptions("name: \"m\" " +
                                Trt(TrtParam("precision_mode", "FP16") +
                                    TrtParam("max_workspace_size_bytes", "1073741824") +
                                    TrtParam("trt_builder_optimization_level", "3")),
                                1);
  ASSERT_EQ(o.execution_providers.size(), 2u);
  EXPECT_EQ(o.execution_providers[0].name, "tensorrt");
  EXPECT_EQ(o.execution_providers[1].name, "cuda");
  const auto& trt = o.execution_providers[0].options;
  EXPECT_THAT(trt, Contains(Pair("device_id", "1")));
  EXPECT_THAT(trt, Contains(Pair("trt_fp16_enable", "1")));
  EXPECT_THAT(trt, Contains(Pair("trt_max_workspace_size", "1073741824")));
  EXPECT_THAT(trt, Contains(Pair("trt_builder_optimization_level", "3")));

  RuntimeOptions fp32 = GpuOptions("name: \"m\" " + Trt(TrtParam("precision_mode", "FP32")));
  for (const auto& [key, value] : fp32.execution_providers[0].options) EXPECT_NE(key, "trt_fp16_enable");
}

TEST(GpuRuntimeOptions, EngineAndTimingCachesDefaultUnderTheSharedModelCacheDir) {
  const std::string config = "name: \"m\" " + Trt(TrtParam("trt_engine_cache_enable", "true") +
                                                 TrtParam("trt_timing_cache_enable", "1"));
  RuntimeOptions a = GpuOptions(config, 0, "/cache");
  RuntimeOptions b = GpuOptions(config, 1, "/cache");
  const auto& trt = Provider(a, "tensorrt")->options;
  EXPECT_THAT(trt, Contains(Pair("trt_engine_cache_enable", "1")));
  EXPECT_THAT(trt, Contains(Pair("trt_engine_cache_path", "/cache/m/3/tensorrt/engines")));
  EXPECT_THAT(trt, Contains(Pair("trt_timing_cache_enable", "1")));
  EXPECT_THAT(trt, Contains(Pair("trt_timing_cache_path", "/cache/m/3/tensorrt/timing")));
  // Every instance of the version shares the directory (the second loads the first's engine).
  EXPECT_THAT(Provider(b, "tensorrt")->options, Contains(Pair("trt_engine_cache_path", "/cache/m/3/tensorrt/engines")));

  RuntimeOptions explicit_path = GpuOptions(
      "name: \"m\" " + Trt(TrtParam("trt_engine_cache_enable", "1") + TrtParam("trt_engine_cache_path", "/fast/e")));
  EXPECT_THAT(Provider(explicit_path, "tensorrt")->options, Contains(Pair("trt_engine_cache_path", "/fast/e")));

  // Without caching enabled no path is passed.
  RuntimeOptions off = GpuOptions("name: \"m\" " + Trt(""));
  for (const auto& [key, value] : Provider(off, "tensorrt")->options) EXPECT_NE(key, "trt_engine_cache_path");
}

TEST(GpuRuntimeOptions, ModelCacheDirLayout) {
  EXPECT_EQ(ModelCacheDir("/var/cache/ortserve", "resnet", "2"), "/var/cache/ortserve/resnet/2");
  const std::string tmp = ModelCacheDir("", "resnet", "2");
  EXPECT_THAT(tmp, HasSubstr("ortserve-model-cache/resnet/2"));
  EXPECT_TRUE(std::filesystem::path(tmp).is_absolute());
}

TEST(GpuRuntimeOptions, OptimizationProfilesPassThroughTogether) {
  RuntimeOptions o = GpuOptions("name: \"m\" " + Trt(TrtParam("trt_profile_min_shapes", "x:1x3x32x32,m:1x32") +
                                                    TrtParam("trt_profile_opt_shapes", "x:8x3x224x224,m:8x224") +
                                                    TrtParam("trt_profile_max_shapes", "x:16x3x512x512,m:16x512")));
  const auto& trt = Provider(o, "tensorrt")->options;
  EXPECT_THAT(trt, Contains(Pair("trt_profile_min_shapes", "x:1x3x32x32,m:1x32")));
  EXPECT_THAT(trt, Contains(Pair("trt_profile_opt_shapes", "x:8x3x224x224,m:8x224")));
  EXPECT_THAT(trt, Contains(Pair("trt_profile_max_shapes", "x:16x3x512x512,m:16x512")));

  EXPECT_THAT(ReadError(Trt(TrtParam("trt_profile_min_shapes", "x:1x3"))).message(), HasSubstr("together"));
  for (const char* bad : {"x", "x:", ":1x2", "x:1xx2", "x:1x2x", "x:1x-2", "x:1x2,", "x:axb"}) {
    Status st = ReadError(Trt(TrtParam("trt_profile_min_shapes", bad) + TrtParam("trt_profile_opt_shapes", "x:1") +
                              TrtParam("trt_profile_max_shapes", "x:1")));
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << bad;
    EXPECT_THAT(st.message(), HasSubstr("trt_profile_min_shapes")) << bad;
  }
}

TEST(GpuRuntimeOptions, CudaProviderParameters) {
  RuntimeOptions o = GpuOptions("name: \"m\" " + Param("cudnn_conv_algo_search", "1") +
                                Param("gpu_mem_limit", "4294967296") + Param("arena_extend_strategy", "1") +
                                Param("use_tf32", "false") + Param("prefer_nhwc", "true") +
                                Param("cudnn_conv_use_max_workspace", "1"));
  const auto& cuda = Provider(o, "cuda")->options;
  EXPECT_THAT(cuda, Contains(Pair("cudnn_conv_algo_search", "HEURISTIC")));
  EXPECT_THAT(cuda, Contains(Pair("gpu_mem_limit", "4294967296")));
  EXPECT_THAT(cuda, Contains(Pair("arena_extend_strategy", "kSameAsRequested")));
  EXPECT_THAT(cuda, Contains(Pair("use_tf32", "0")));
  EXPECT_THAT(cuda, Contains(Pair("prefer_nhwc", "1")));
  EXPECT_THAT(cuda, Contains(Pair("cudnn_conv_use_max_workspace", "1")));

  RuntimeOptions named = GpuOptions("name: \"m\" " + Param("cudnn_conv_algo_search", "DEFAULT"));
  EXPECT_THAT(Provider(named, "cuda")->options, Contains(Pair("cudnn_conv_algo_search", "DEFAULT")));

  // The same keys through a "cuda" accelerator.
  RuntimeOptions acc = GpuOptions(
      "name: \"m\" optimization { execution_accelerators { gpu_execution_accelerator: [ { name: \"cuda\" "
      "parameters { key: \"use_tf32\" value: \"1\" } } ] } }");
  EXPECT_THAT(Provider(acc, "cuda")->options, Contains(Pair("use_tf32", "1")));
}

TEST(GpuRuntimeOptions, FallbackCudaGraphsAndNumericalCheck) {
  RuntimeOptions o = GpuOptions("name: \"m\" " + Param("allow_cpu_fallback", "true") +
                                Param("enable_cuda_graph", "1") + Param("cuda_graph_max_shapes", "4") +
                                Param("numerical_check", "enforce") + Param("numerical_tolerance", "0.01"));
  EXPECT_TRUE(o.allow_fallback);
  EXPECT_TRUE(o.cuda_graph);
  EXPECT_TRUE(o.io_binding);
  EXPECT_EQ(o.cuda_graph_max_shapes, 4);
  EXPECT_THAT(Provider(o, "cuda")->options, Contains(Pair("enable_cuda_graph", "1")));
  EXPECT_EQ(o.numerical_check, NumericalCheck::kEnforce);
  EXPECT_DOUBLE_EQ(o.numerical_tolerance, 0.01);

  // With TensorRT, its own CUDA-graph switch is set too.
  RuntimeOptions trt = GpuOptions("name: \"m\" " + Param("enable_cuda_graph", "1") + Trt(""));
  EXPECT_THAT(Provider(trt, "tensorrt")->options, Contains(Pair("trt_cuda_graph_enable", "1")));

  EXPECT_EQ(GpuOptions("name: \"m\" " + Param("numerical_check", "warn")).numerical_check, NumericalCheck::kWarn);
  EXPECT_FALSE(GpuOptions("name: \"m\" " + Param("io_binding", "0")).io_binding);
}

TEST(GpuConfigErrors, BadValuesAndUnknownNamesAreUnavailableWithAReason) {
  struct Case {
    std::string config;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"optimization { execution_accelerators { gpu_execution_accelerator: [ { name: \"warp\" } ] } }",
       "gpu_execution_accelerator 'warp' is not supported"},
      {"optimization { execution_accelerators { cpu_execution_accelerator: [ { name: \"openvino\" } ] } }",
       "cpu_execution_accelerator 'openvino'"},
      {Trt(TrtParam("precision_mode", "INT8")), "'precision_mode' must be FP32 or FP16"},
      {Trt(TrtParam("precision_mode", "fp16x")), "got 'fp16x'"},
      {Trt(TrtParam("max_workspace_size_bytes", "lots")), "max_workspace_size_bytes"},
      {Trt(TrtParam("trt_engine_cache_enable", "maybe")), "trt_engine_cache_enable"},
      {Trt(TrtParam("trt_engine_cache_path", "")), "trt_engine_cache_path"},
      {Trt(TrtParam("trt_builder_optimization_level", "9")), "trt_builder_optimization_level"},
      {Trt(TrtParam("warp_factor", "9")), "'warp_factor' is not supported"},
      {"optimization { execution_accelerators { gpu_execution_accelerator: [ { name: \"tensorrt\" }, "
       "{ name: \"tensorrt\" } ] } }",
       "listed twice"},
      {"optimization { execution_accelerators { gpu_execution_accelerator: [ { name: \"cuda\" "
       "parameters { key: \"warp\" value: \"1\" } } ] } }",
       "cuda accelerator parameter 'warp'"},
      {Param("cudnn_conv_algo_search", "3"), "cudnn_conv_algo_search"},
      {Param("gpu_mem_limit", "-1"), "gpu_mem_limit"},
      {Param("gpu_mem_limit", "0"), "gpu_mem_limit"},
      {Param("arena_extend_strategy", "2"), "arena_extend_strategy"},
      {Param("use_tf32", "yes"), "use_tf32"},
      {Param("prefer_nhwc", "2"), "prefer_nhwc"},
      {Param("allow_cpu_fallback", "sometimes"), "allow_cpu_fallback"},
      {Param("enable_cuda_graph", "on"), "enable_cuda_graph"},
      {Param("enable_cuda_graph", "1") + Param("io_binding", "0"), "needs 'io_binding'"},
      {Param("cuda_graph_max_shapes", "0"), "cuda_graph_max_shapes"},
      {Param("numerical_check", "strict"), "off, warn or enforce"},
      {Param("numerical_tolerance", "0"), "numerical_tolerance"},
      {Param("numerical_tolerance", "abc"), "numerical_tolerance"},
  };
  for (const auto& c : cases) {
    Status st = ReadError(c.config);
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << c.config;
    EXPECT_THAT(st.message(), HasSubstr(c.expect)) << c.config;
    // The load path reports the same reason.
    auto settings = ReadSessionSettings(Parse(c.config));
    ASSERT_FALSE(settings.ok()) << c.config;
    EXPECT_THAT(settings.status().message(), HasSubstr(c.expect));
  }
}

TEST(GpuConfigErrors, KnownParameterKeys) {
  EXPECT_TRUE(IsGpuParameter("enable_cuda_graph"));
  EXPECT_TRUE(IsGpuParameter("gpu_mem_limit"));
  EXPECT_TRUE(IsGpuParameter("numerical_tolerance"));
  EXPECT_FALSE(IsGpuParameter("intra_op_thread_count"));
  EXPECT_FALSE(IsGpuParameter("warp"));
  // Unrelated parameters are not GPU errors.
  EXPECT_TRUE(ReadGpuSettings(Parse(Param("some_other_key", "x"))).ok());
}

}  // namespace
}  // namespace ortserve
