#pragma once
// One loaded copy of a model that can execute (an ORT session and what it
// owns). This header is free of ONNX Runtime types so the scheduler can drive
// instances without knowing ORT; OrtModelInstance implements it.
#include <string>
#include <vector>

#include "core/Status.h"
#include "core/Tensor.h"

namespace ortserve {

// Whether an instance's session was built from the optimized-model cache
// (kHit), built and then saved to it (kMiss), or built without it (kOff).
enum class ModelCacheUse { kOff, kMiss, kHit };

class ModelInstance {
 public:
  virtual ~ModelInstance() = default;

  // Runs the model once. `inputs` carry the model's input names and full
  // (batched) shapes; `outputs` receives every model output, in the order of
  // `OutputNames()`. Output tensors own (or share) their memory, so they stay
  // valid after the next Run. Not thread-safe: one caller at a time.
  virtual Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) = 0;

  // Asks a Run in progress on another thread to stop as soon as it can; that
  // Run then returns a non-OK status. Thread-safe.
  virtual void Terminate() = 0;

  virtual const std::vector<std::string>& OutputNames() const = 0;

  // Tells the instance that warm-up is over (its first runs were warm-up
  // runs). A GPU instance with a numerical check stops comparing against its
  // CPU reference and frees it. Not concurrently with Run.
  virtual void FinishWarmup() {}

  virtual ModelCacheUse cache_use() const { return ModelCacheUse::kOff; }
};

}  // namespace ortserve
