#pragma once
// How to build one model instance's ONNX Runtime session. Filled by the
// repository from the model config; plain data, no ORT types.
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ortserve {

// Pre-packed weights shared by the sessions that hold it (opaque here; see
// OrtModelInstance.h, CreateSharedWeights).
class SharedWeights;

enum class GraphOptimizationLevel { kDisabled, kBasic, kExtended, kAll };
enum class ExecutionMode { kSequential, kParallel };
// Compare a GPU instance's outputs with a CPU FP32 session on its warm-up runs.
enum class NumericalCheck { kOff, kWarn, kEnforce };

struct ExecutionProviderOptions {
  std::string name;  // "cpu", "cuda", "tensorrt"
  std::vector<std::pair<std::string, std::string>> options;
};

struct RuntimeOptions {
  std::string model_path;  // .onnx file
  // Run on the env's global intra-op pool (ConfigureSharedThreadPool); the
  // thread counts below then do not apply. Falls back to the session's own
  // pools when the env has none.
  bool shared_thread_pool = false;
  int intra_op_threads = 1;
  int inter_op_threads = 1;
  // CPU instances of one model version hold the same object, so that their
  // sessions keep one copy of the pre-packed weights. Null: not shared.
  std::shared_ptr<SharedWeights> shared_weights;
  // Directory of the optimized-model cache (OptimizedModelCache.h); "": off.
  std::string optimized_model_cache_dir;
  bool allow_spinning = false;  // ORT thread spinning: fast hand-off, burns idle CPU
  ExecutionMode execution_mode = ExecutionMode::kSequential;
  bool enable_mem_arena = true;
  bool enable_mem_pattern = true;
  GraphOptimizationLevel graph_optimization_level = GraphOptimizationLevel::kAll;
  // Tried in order; an unusable provider fails the load unless allow_fallback.
  std::vector<ExecutionProviderOptions> execution_providers;  // empty: CPU
  bool allow_fallback = false;
  // Custom-operator libraries registered in the session options, in order
  // (OpLibraries.h): the server's --op-library ones, then the model's own.
  std::vector<std::string> op_libraries;
  // ONNX Runtime session config entries (onnxruntime_session_options_config_keys.h),
  // passed to Ort::SessionOptions::AddConfigEntry after ortserve's own settings,
  // so that they win; each key once. ORT ignores keys it does not know.
  std::vector<std::pair<std::string, std::string>> config_entries;

  // GPU instances only (ignored when the session ends up on CPU alone).
  int device_id = 0;  // CUDA ordinal, also passed to the cuda/tensorrt provider options
  // Bind inputs from pinned host staging buffers and outputs to pinned host
  // memory through an Ort::IoBinding (ORT then does the device copies).
  bool io_binding = false;
  // CUDA graphs: one captured graph ("gpu_graph_id") per distinct input shape
  // set, at most cuda_graph_max_shapes of them; other shapes run uncaptured.
  // Needs io_binding and "enable_cuda_graph" in the cuda provider options.
  bool cuda_graph = false;
  int cuda_graph_max_shapes = 8;
  NumericalCheck numerical_check = NumericalCheck::kOff;
  // An element passes when |gpu - cpu| <= tolerance * max(1, |cpu|).
  double numerical_tolerance = 1e-3;
  // The first this-many runs (warm-up) are checked, or fewer if the caller
  // calls ModelInstance::FinishWarmup() first.
  int numerical_check_runs = 32;
  // Instance label for logs ("resnet:1#0").
  std::string label;
};

}  // namespace ortserve
