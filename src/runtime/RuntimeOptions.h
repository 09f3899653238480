#pragma once
// How to build one model instance's ONNX Runtime session. Filled by the
// repository from the model config; plain data, no ORT types.
#include <string>
#include <vector>

namespace ortserve {

enum class GraphOptimizationLevel { kDisabled, kBasic, kExtended, kAll };
enum class ExecutionMode { kSequential, kParallel };

struct ExecutionProviderOptions {
  std::string name;  // "cpu", "cuda", "tensorrt"
  std::vector<std::pair<std::string, std::string>> options;
};

struct RuntimeOptions {
  std::string model_path;  // .onnx file
  int intra_op_threads = 1;
  int inter_op_threads = 1;
  bool allow_spinning = false;  // ORT thread spinning: fast hand-off, burns idle CPU
  ExecutionMode execution_mode = ExecutionMode::kSequential;
  bool enable_mem_arena = true;
  bool enable_mem_pattern = true;
  GraphOptimizationLevel graph_optimization_level = GraphOptimizationLevel::kAll;
  // Tried in order; an unusable provider fails the load unless allow_fallback.
  std::vector<ExecutionProviderOptions> execution_providers;  // empty: CPU
  bool allow_fallback = false;
  // Instance label for logs ("resnet:1#0").
  std::string label;
};

}  // namespace ortserve
