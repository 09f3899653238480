#pragma once
// A model's inputs and outputs as the model file declares them: what config
// auto-complete fills in and config checks compare against. Free of ONNX
// Runtime types (runtime/OrtModelSignature.h reads it from a session).
#include <string>
#include <vector>

#include "core/DataType.h"
#include "core/Tensor.h"

namespace ortserve {

struct TensorSignature {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;  // -1 for a dynamic (symbolic or unknown) dimension
};

struct ModelSignature {
  std::vector<TensorSignature> inputs;
  std::vector<TensorSignature> outputs;
};

// The tensor named `name`, or null.
inline const TensorSignature* FindTensor(const std::vector<TensorSignature>& tensors, const std::string& name) {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Whether dim 0 is dynamic: the model can take a batch dimension there.
inline bool HasDynamicFirstDim(const TensorSignature& t) { return !t.shape.empty() && t.shape[0] < 0; }

}  // namespace ortserve
