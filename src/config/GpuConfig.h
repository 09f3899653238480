#pragma once
// GPU serving options in Triton's terms -> RuntimeOptions (docs/gpu.md lists
// every option). The repository knows the proto; the runtime only ever sees
// plain RuntimeOptions.
#include <string>
#include <utility>
#include <vector>

#include "core/Status.h"
#include "model_config.pb.h"
#include "runtime/RuntimeOptions.h"

namespace ortserve {

using OptionList = std::vector<std::pair<std::string, std::string>>;

struct GpuSettings {
  std::string model_name;  // for the default cache directory
  // From optimization.execution_accelerators.gpu_execution_accelerator
  // "tensorrt": ORT TensorRT provider options (trt_* names), device_id and
  // cache paths excluded (set per instance).
  bool tensorrt = false;
  OptionList tensorrt_options;
  bool trt_engine_cache = false;
  std::string trt_engine_cache_path;  // empty: <model cache dir>/tensorrt/engines
  bool trt_timing_cache = false;
  std::string trt_timing_cache_path;  // empty: <model cache dir>/tensorrt/timing
  // ORT CUDA provider options from `parameters` (and a "cuda" accelerator).
  OptionList cuda_options;
  bool allow_cpu_fallback = false;
  bool io_binding = true;
  bool cuda_graph = false;
  int cuda_graph_max_shapes = 8;
  NumericalCheck numerical_check = NumericalCheck::kOff;
  double numerical_tolerance = 1e-3;
};

// Reads the GPU options of a model config. Every malformed value, unknown
// accelerator name or unknown accelerator parameter fails with kUnavailable
// naming the option and the value (the model then loads as UNAVAILABLE).
// Model `parameters` keys it does not know are left to the caller.
Result<GpuSettings> ReadGpuSettings(const inference::ModelConfig& config);

// Whether `key` is a model `parameters` key ReadGpuSettings understands (for
// the "unknown parameter" log of ConfigParse's IsKnownParameter).
bool IsGpuParameter(const std::string& key);

// Directory for the engine/timing caches of one model version, shared by all
// its instances: <root>/<model>/<version>. An empty root means
// <system temp dir>/ortserve-model-cache (main's --model-cache-dir sets it).
std::string ModelCacheDir(const std::string& root, const std::string& model, const std::string& version);

// Fills the GPU part of `options` for one GPU instance on `device_id`:
// providers in order (tensorrt, then cuda), device id, fallback, IOBinding,
// CUDA graphs, numerical check, cache paths under `model_cache_dir`.
void ApplyGpuSettings(const GpuSettings& gpu, int device_id, const std::string& model_cache_dir,
                      RuntimeOptions* options);

}  // namespace ortserve
