#pragma once
// The GPU run path of one instance: IOBinding with pinned host staging, and
// optionally CUDA graphs (one captured graph per input-shape set). Uses only
// ONNX Runtime's API (no CUDA headers), so it is always compiled; it is only
// created for a session that really runs on CUDA/TensorRT.
#include <onnxruntime_cxx_api.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "runtime/OrtModelInstance.h"
#include "runtime/RuntimeOptions.h"

namespace ortserve {

// Owned by one instance, used by one Run at a time (not thread-safe).
//
// Without CUDA graphs: every fixed-size input is copied into a per-input
// pinned ("CudaPinned") host buffer that only grows, and bound from there
// (ORT's host->device copy is then a DMA from pinned memory); outputs are
// bound to pinned host memory, freshly allocated by ORT per run so that the
// exported tensors stay valid after the next run.
//
// With CUDA graphs: a graph needs fixed device addresses. Per input-shape set
// (up to options.cuda_graph_max_shapes; further shapes run uncaptured) a slot
// owns device input tensors and the device output tensors of its first run;
// each run copies host inputs into the slot (Env::CopyTensors), runs with the
// slot's "gpu_graph_id" (ORT captures after its own warm-up runs and replays
// afterwards), and copies the outputs into new pinned host tensors.
// Replays cannot be interrupted: Terminate() only reaches uncaptured runs
// (the instance still reports the run as cancelled).
class GpuIoBinding {
 public:
  // `session` must outlive this object. Fails (with ORT's message) when the
  // session has no CUDA allocators, or for BYTES inputs with CUDA graphs.
  static Result<std::unique_ptr<GpuIoBinding>> Create(Ort::Session& session, const ModelSignature& signature,
                                                      const RuntimeOptions& options);

  // `staged`: CPU values in model input order (InputStaging's output).
  // `uncaptured`: the instance's run options (terminable); with CUDA graphs
  // they must carry gpu_graph_id=-1. Appends one value per model output to
  // `results`. May throw Ort::Exception.
  Status Run(const std::vector<Ort::Value>& staged, Ort::RunOptions& uncaptured,
             std::vector<Ort::Value>* results);

 private:
  struct GraphSlot {
    std::vector<Ort::Value> device_inputs;
    std::vector<Ort::Value> device_outputs;
    Ort::RunOptions run_options;
  };

  GpuIoBinding(Ort::Session& session, const ModelSignature& signature, const RuntimeOptions& options);
  Status RunPinned(const std::vector<Ort::Value>& staged, Ort::RunOptions& run_options,
                   std::vector<Ort::Value>* results);
  Status RunGraph(GraphSlot& slot, const std::vector<Ort::Value>& staged, std::vector<Ort::Value>* results);
  Result<GraphSlot*> NewSlot(const std::vector<Ort::Value>& staged, Ort::RunOptions& uncaptured);
  Status Copy(const std::vector<Ort::Value>& from, const std::vector<Ort::Value>& to, const char* what);

  Ort::Session& session_;
  const std::string label_;
  std::vector<std::string> input_names_;
  std::vector<std::string> output_names_;
  const bool cuda_graph_;
  const int max_graphs_;
  Ort::MemoryInfo pinned_info_;
  Ort::MemoryInfo device_info_;
  Ort::Allocator pinned_allocator_;
  Ort::Allocator device_allocator_;
  Ort::IoBinding binding_;
  // Per input: pinned staging buffer (grows, never shrinks) and its size.
  std::vector<std::unique_ptr<void, std::function<void(void*)>>> pinned_;
  std::vector<size_t> pinned_bytes_;
  std::map<std::string, GraphSlot> slots_;  // key: input shapes
  int next_graph_id_ = 1;
};

}  // namespace ortserve
