#pragma once
// Translates a completed model config into what the lower layers take:
// RuntimeOptions per instance and DynamicBatcherOptions per model version.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/GpuConfig.h"
#include "core/Status.h"
#include "model_config.pb.h"
#include "runtime/RuntimeOptions.h"
#include "scheduler/DynamicBatcherOptions.h"

namespace ortserve {

// ONNX Runtime session config entries (key, value), in the order applied.
using SessionConfigEntries = std::vector<std::pair<std::string, std::string>>;
// A parameter "session.<ort key>" passes <ort key> to AddConfigEntry, e.g.
// "session.session.disable_prepacking" or "session.mlas.disable_kleidiai".
inline constexpr std::string_view kSessionConfigPrefix = "session.";

// Session settings from `parameters` (Triton onnxruntime backend names) and
// optimization.graph.level. Unknown parameter keys are not errors (the caller
// logs them); malformed values are (kInvalidArgument naming key and value).
struct OrtSessionSettings {
  int intra_op_threads = 0;  // 0: decided by the thread plan
  int inter_op_threads = 1;
  ExecutionMode execution_mode = ExecutionMode::kSequential;
  bool enable_mem_arena = true;
  bool enable_mem_pattern = true;
  // Our own "allow_spinning" parameter, default "0": see ThreadPlan.h for why.
  bool allow_spinning = false;
  // Our own "ort_thread_pool" parameter: "own" gives each instance pools of
  // its own instead of the process's shared pool ("shared", the default).
  bool own_thread_pool = false;
  // Triton onnxruntime backend semantics of optimization.graph.level:
  // -1 -> basic, 1 -> extended, 0/absent/anything else -> all.
  GraphOptimizationLevel graph_optimization_level = GraphOptimizationLevel::kAll;
  // GPU options (accelerators, CUDA parameters, ...): see GpuConfig.h and
  // docs/gpu.md. Read for every model, applied to KIND_GPU instances only.
  GpuSettings gpu;
  // Custom-operator libraries for every session of the model: the server's
  // (--op-library) first, then model_operations.op_library_filename, each
  // path once (a model may name one the server already registers).
  std::vector<std::string> op_libraries;
  // The server's entries (--backend-config=onnxruntime,session.<key>=V),
  // then the model's "session.<key>" parameters by key; a model's key
  // replaces the server's. Values are checked by ORT, not here.
  SessionConfigEntries config_entries;
};
// `server_op_libraries`: --op-library, applied to every model. An empty
// op_library_filename is kInvalidArgument naming its index, a parameter
// "session." with no key after it kInvalidArgument too.
Result<OrtSessionSettings> ReadSessionSettings(const inference::ModelConfig& config,
                                               const std::vector<std::string>& server_op_libraries = {},
                                               const SessionConfigEntries& server_config_entries = {});
// Adds or replaces `key` in `entries`.
void SetSessionConfigEntry(SessionConfigEntries* entries, const std::string& key, const std::string& value);

// One entry per instance to create, from instance_group: KIND_CPU and
// KIND_AUTO give CPU instances; KIND_GPU gives `count` CUDA instances on each
// listed GPU (GPU 0 when none is listed). KIND_MODEL fails (kUnavailable).
struct InstanceSpec {
  bool gpu = false;
  int device_id = 0;
};
// Each instance is a session with its own weights and a worker thread; far
// more than any machine can use, and a bound that keeps a typo from
// allocating gigabytes.
inline constexpr int kMaxInstancesPerModel = 256;

Result<std::vector<InstanceSpec>> ExpandInstanceGroups(const inference::ModelConfig& config);

// `model_cache_root`: main's --model-cache-dir ("" = system temp dir); GPU
// instances keep TensorRT engine/timing caches under
// ModelCacheDir(root, model, version), the version being the name of the
// model file's directory (<repository>/<model>/<version>/model.onnx).
RuntimeOptions MakeRuntimeOptions(const OrtSessionSettings& settings, int intra_op_threads,
                                  const InstanceSpec& instance, const std::string& model_path,
                                  const std::string& label, const std::string& model_cache_root = "");

// parameter batch_window: true for "adaptive", false for "fixed" (the
// default, Triton's window); kUnavailable for anything else.
Result<bool> ReadAdaptiveWindow(const inference::ModelConfig& config);
// The parameter instance_batches: 'shared' (true) lets a free CPU instance
// take its share of the work in hand (InstanceBalancer); 'whole' (false,
// the default, Triton's) runs each batch whole on one instance.
Result<bool> ReadSharedInstanceBatches(const inference::ModelConfig& config);
// Parameter inline_run_max_us: the bound on a model's average run for inline
// runs (ComputePolicy::inline_run_max_us), default kDefaultInlineRunMaxUs.
Result<uint64_t> ReadInlineRunMaxUs(const inference::ModelConfig& config);

// dynamic_batching -> DynamicBatcherOptions. Priority levels and queue
// policies are checked (default_priority_level within 1..priority_levels,
// policy keys too). The compute policy is the loader's to fill.
Result<DynamicBatcherOptions> MakeDynamicBatcherOptions(const inference::ModelConfig& config,
                                                        const std::string& version);

}  // namespace ortserve
