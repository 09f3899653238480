#include "config/GpuConfig.h"

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <set>

namespace ortserve {
namespace {

Status Bad(const std::string& where, const std::string& key, const std::string& value, const std::string& want) {
  return Unavailable(where + " '" + key + "' must be " + want + ", got '" + value + "'");
}

Result<bool> Bool(const std::string& where, const std::string& key, const std::string& v) {
  if (v == "1" || v == "true" || v == "True" || v == "TRUE") return true;
  if (v == "0" || v == "false" || v == "False" || v == "FALSE") return false;
  return Bad(where, key, v, "0/1 or true/false");
}

Result<uint64_t> Unsigned(const std::string& where, const std::string& key, const std::string& v, uint64_t min,
                          uint64_t max) {
  uint64_t out = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || ptr != v.data() + v.size() || out < min || out > max)
    return Bad(where, key, v, "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return out;
}

// "input:1x3x224x224,mask:1x224" (ORT trt_profile_*_shapes syntax).
bool ValidProfileShapes(const std::string& v) {
  if (v.empty()) return false;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(',', start);
    if (end == std::string::npos) end = v.size();
    const std::string item = v.substr(start, end - start);
    const size_t colon = item.rfind(':');
    if (colon == 0 || colon == std::string::npos || colon + 1 == item.size()) return false;
    const std::string dims = item.substr(colon + 1);
    size_t d = 0;
    while (d < dims.size()) {
      size_t x = dims.find('x', d);
      if (x == std::string::npos) x = dims.size();
      if (x == d) return false;
      for (size_t i = d; i < x; ++i)
        if (dims[i] < '0' || dims[i] > '9') return false;
      d = x + 1;
      if (x + 1 == dims.size()) return false;  // trailing 'x'
    }
    start = end + 1;
    if (end == v.size()) break;
  }
  return true;
}

// CUDA provider options, shared by model `parameters` and a "cuda" accelerator.
// Returns true when `key` is one; appends the ORT option to `out`.
Result<bool> ReadCudaOption(const std::string& where, const std::string& key, const std::string& v,
                            OptionList* out) {
  if (key == "cudnn_conv_algo_search") {
    static const char* kNames[] = {"EXHAUSTIVE", "HEURISTIC", "DEFAULT"};
    std::string value;
    for (int i = 0; i < 3; ++i)
      if (v == std::to_string(i) || v == kNames[i]) value = kNames[i];
    if (value.empty()) return Bad(where, key, v, "0/EXHAUSTIVE, 1/HEURISTIC or 2/DEFAULT");
    out->emplace_back("cudnn_conv_algo_search", value);
    return true;
  }
  if (key == "gpu_mem_limit") {
    auto n = Unsigned(where, key, v, 1, UINT64_MAX);
    if (!n.ok()) return n.status();
    out->emplace_back("gpu_mem_limit", std::to_string(n.value()));
    return true;
  }
  if (key == "arena_extend_strategy") {
    std::string value;
    if (v == "0" || v == "kNextPowerOfTwo") value = "kNextPowerOfTwo";
    if (v == "1" || v == "kSameAsRequested") value = "kSameAsRequested";
    if (value.empty()) return Bad(where, key, v, "0/kNextPowerOfTwo or 1/kSameAsRequested");
    out->emplace_back("arena_extend_strategy", value);
    return true;
  }
  if (key == "use_tf32" || key == "prefer_nhwc" || key == "cudnn_conv_use_max_workspace") {
    auto b = Bool(where, key, v);
    if (!b.ok()) return b.status();
    out->emplace_back(key, b.value() ? "1" : "0");
    return true;
  }
  return false;
}

Status ReadTensorRt(const inference::ModelOptimizationPolicy::ExecutionAccelerators::Accelerator& acc,
                    GpuSettings* gpu) {
  const std::string where = "tensorrt accelerator parameter";
  std::set<std::string> profile_keys;
  for (const auto& [key, v] : acc.parameters()) {
    if (key == "precision_mode") {
      if (v == "FP16") {
        gpu->tensorrt_options.emplace_back("trt_fp16_enable", "1");
      } else if (v != "FP32") {
        return Bad(where, key, v, "FP32 or FP16 (INT8 needs a calibration table and is not supported)");
      }
    } else if (key == "max_workspace_size_bytes") {
      auto n = Unsigned(where, key, v, 1, UINT64_MAX);
      if (!n.ok()) return n.status();
      gpu->tensorrt_options.emplace_back("trt_max_workspace_size", std::to_string(n.value()));
    } else if (key == "trt_engine_cache_enable" || key == "trt_timing_cache_enable") {
      auto b = Bool(where, key, v);
      if (!b.ok()) return b.status();
      (key == "trt_engine_cache_enable" ? gpu->trt_engine_cache : gpu->trt_timing_cache) = b.value();
    } else if (key == "trt_engine_cache_path" || key == "trt_timing_cache_path") {
      if (v.empty()) return Bad(where, key, v, "a directory path");
      (key == "trt_engine_cache_path" ? gpu->trt_engine_cache_path : gpu->trt_timing_cache_path) = v;
    } else if (key == "trt_profile_min_shapes" || key == "trt_profile_opt_shapes" ||
               key == "trt_profile_max_shapes") {
      if (!ValidProfileShapes(v)) return Bad(where, key, v, "'<input>:<d0>x<d1>...[,<input>:...]'");
      profile_keys.insert(key);
      gpu->tensorrt_options.emplace_back(key, v);
    } else if (key == "trt_builder_optimization_level") {
      auto n = Unsigned(where, key, v, 0, 5);
      if (!n.ok()) return n.status();
      gpu->tensorrt_options.emplace_back(key, v);
    } else if (key == "trt_min_subgraph_size" || key == "trt_max_partition_iterations") {
      auto n = Unsigned(where, key, v, 1, INT32_MAX);
      if (!n.ok()) return n.status();
      gpu->tensorrt_options.emplace_back(key, v);
    } else {
      return Unavailable(where + " '" + key +
                         "' is not supported (supported: precision_mode, max_workspace_size_bytes, "
                         "trt_engine_cache_enable, trt_engine_cache_path, trt_timing_cache_enable, "
                         "trt_timing_cache_path, trt_profile_min_shapes, trt_profile_opt_shapes, "
                         "trt_profile_max_shapes, trt_builder_optimization_level, trt_min_subgraph_size, "
                         "trt_max_partition_iterations)");
    }
  }
  if (!profile_keys.empty() && profile_keys.size() != 3) {
    return Unavailable(
        "tensorrt accelerator: trt_profile_min_shapes, trt_profile_opt_shapes and trt_profile_max_shapes "
        "must be given together");
  }
  return Status::Ok();
}

}  // namespace

Result<GpuSettings> ReadGpuSettings(const inference::ModelConfig& config) {
  GpuSettings gpu;
  gpu.model_name = config.name();
  const std::string where = "parameter";
  for (const auto& [key, param] : config.parameters()) {
    const std::string& v = param.string_value();
    auto cuda = ReadCudaOption(where, key, v, &gpu.cuda_options);
    if (!cuda.ok()) return cuda.status();
    if (cuda.value()) continue;
    if (key == "allow_cpu_fallback" || key == "enable_cuda_graph" || key == "io_binding") {
      auto b = Bool(where, key, v);
      if (!b.ok()) return b.status();
      (key == "allow_cpu_fallback" ? gpu.allow_cpu_fallback
                                   : key == "enable_cuda_graph" ? gpu.cuda_graph : gpu.io_binding) = b.value();
    } else if (key == "cuda_graph_max_shapes") {
      auto n = Unsigned(where, key, v, 1, 1024);
      if (!n.ok()) return n.status();
      gpu.cuda_graph_max_shapes = static_cast<int>(n.value());
    } else if (key == "numerical_check") {
      if (v == "off") gpu.numerical_check = NumericalCheck::kOff;
      else if (v == "warn") gpu.numerical_check = NumericalCheck::kWarn;
      else if (v == "enforce") gpu.numerical_check = NumericalCheck::kEnforce;
      else return Bad(where, key, v, "off, warn or enforce");
    } else if (key == "numerical_tolerance") {
      double t = 0;
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), t);
      if (ec != std::errc() || ptr != v.data() + v.size() || !(t > 0) || t > 1e6)
        return Bad(where, key, v, "a number > 0 (e.g. 1e-3)");
      gpu.numerical_tolerance = t;
    }
  }
  if (gpu.cuda_graph && !gpu.io_binding)
    return Unavailable("parameter 'enable_cuda_graph' needs 'io_binding' (CUDA graphs replay fixed device buffers)");

  const auto& accelerators = config.optimization().execution_accelerators();
  for (const auto& acc : accelerators.gpu_execution_accelerator()) {
    if (acc.name() == "tensorrt") {
      if (gpu.tensorrt) return Unavailable("gpu_execution_accelerator 'tensorrt' is listed twice");
      gpu.tensorrt = true;
      Status st = ReadTensorRt(acc, &gpu);
      if (!st.ok()) return st;
    } else if (acc.name() == "cuda") {
      for (const auto& [key, v] : acc.parameters()) {
        auto cuda = ReadCudaOption("cuda accelerator parameter", key, v, &gpu.cuda_options);
        if (!cuda.ok()) return cuda.status();
        if (!cuda.value())
          return Unavailable("cuda accelerator parameter '" + key +
                             "' is not supported (supported: cudnn_conv_algo_search, gpu_mem_limit, "
                             "arena_extend_strategy, use_tf32, prefer_nhwc, cudnn_conv_use_max_workspace)");
      }
    } else {
      return Unavailable("gpu_execution_accelerator '" + acc.name() +
                         "' is not supported (supported: tensorrt, cuda)");
    }
  }
  for (const auto& acc : accelerators.cpu_execution_accelerator()) {
    return Unavailable("cpu_execution_accelerator '" + acc.name() +
                       "' is not supported (CPU instances run on ONNX Runtime's CPU provider)");
  }
  return gpu;
}

bool IsGpuParameter(const std::string& key) {
  static const std::set<std::string> kKeys = {
      "allow_cpu_fallback", "enable_cuda_graph", "cuda_graph_max_shapes", "io_binding",
      "numerical_check",    "numerical_tolerance", "cudnn_conv_algo_search", "gpu_mem_limit",
      "arena_extend_strategy", "use_tf32", "prefer_nhwc", "cudnn_conv_use_max_workspace"};
  return kKeys.count(key) > 0;
}

std::string ModelCacheDir(const std::string& root, const std::string& model, const std::string& version) {
  std::filesystem::path base = root;
  if (base.empty()) {
    std::error_code ec;
    base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    base /= "ortserve-model-cache";
  }
  return (base / model / version).string();
}

void ApplyGpuSettings(const GpuSettings& gpu, int device_id, const std::string& model_cache_dir,
                      RuntimeOptions* o) {
  const std::string device = std::to_string(device_id);
  if (gpu.tensorrt) {
    ExecutionProviderOptions trt{"tensorrt", {{"device_id", device}}};
    trt.options.insert(trt.options.end(), gpu.tensorrt_options.begin(), gpu.tensorrt_options.end());
    const std::filesystem::path dir = model_cache_dir;
    if (gpu.trt_engine_cache) {
      trt.options.emplace_back("trt_engine_cache_enable", "1");
      trt.options.emplace_back("trt_engine_cache_path", gpu.trt_engine_cache_path.empty()
                                                            ? (dir / "tensorrt" / "engines").string()
                                                            : gpu.trt_engine_cache_path);
    }
    if (gpu.trt_timing_cache) {
      trt.options.emplace_back("trt_timing_cache_enable", "1");
      trt.options.emplace_back("trt_timing_cache_path", gpu.trt_timing_cache_path.empty()
                                                            ? (dir / "tensorrt" / "timing").string()
                                                            : gpu.trt_timing_cache_path);
    }
    if (gpu.cuda_graph) trt.options.emplace_back("trt_cuda_graph_enable", "1");
    o->execution_providers.push_back(std::move(trt));
  }
  ExecutionProviderOptions cuda{"cuda", {{"device_id", device}}};
  cuda.options.insert(cuda.options.end(), gpu.cuda_options.begin(), gpu.cuda_options.end());
  if (gpu.cuda_graph) cuda.options.emplace_back("enable_cuda_graph", "1");
  o->execution_providers.push_back(std::move(cuda));
  o->device_id = device_id;
  o->allow_fallback = gpu.allow_cpu_fallback;  // default false: no silent CPU fallback
  o->io_binding = gpu.io_binding;
  o->cuda_graph = gpu.cuda_graph;
  o->cuda_graph_max_shapes = gpu.cuda_graph_max_shapes;
  o->numerical_check = gpu.numerical_check;
  o->numerical_tolerance = gpu.numerical_tolerance;
}

}  // namespace ortserve
