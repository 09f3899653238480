#pragma once
// Turns the caller's input Tensors into ORT values for one Run, in the
// model's input order, without copying whenever ORT can read the caller's
// bytes in place.
#include <onnxruntime_cxx_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/Status.h"
#include "core/Tensor.h"
#include "runtime/OrtModelInstance.h"

namespace ortserve {

// Owned by one instance and used by one Run at a time (not thread-safe).
//
// Fixed-size inputs: an Ort::Value is created over the caller's bytes when
// the pointer is aligned for the element type (ORT kernels read typed
// pointers; a misaligned one is undefined behaviour). A misaligned input is
// copied into a per-input scratch buffer that only ever grows, so once warm
// the copy path allocates nothing either.
// BYTES inputs: the length-prefixed elements are decoded into an ORT string
// tensor (ORT strings are std::string; a copy cannot be avoided).
class InputStaging {
 public:
  // `inputs`: the model's inputs in session order; `model` names it in errors.
  InputStaging(std::vector<TensorSignature> inputs, std::string model);

  // Appends one value per model input to `values` (model order). Fails with
  // InvalidArgument for a missing, unknown or duplicate input, a data type
  // other than the model's, or a byte size that does not match the shape.
  // The values view `tensors`' memory: keep the tensors alive until the
  // values are released. May throw Ort::Exception.
  Status Stage(const std::vector<Tensor>& tensors, std::vector<Ort::Value>* values);

 private:
  Status Validate(const TensorSignature& expected, const Tensor& tensor) const;
  Ort::Value StageFixedSize(size_t index, const Tensor& tensor);
  Ort::Value StageBytes(const Tensor& tensor);

  std::vector<TensorSignature> inputs_;
  std::string model_;
  std::vector<const Tensor*> matched_;            // per input, for the current Stage
  std::vector<std::vector<std::byte>> scratch_;  // per input; grows, never shrinks
  Ort::MemoryInfo cpu_memory_;
  Ort::AllocatorWithDefaultOptions allocator_;
  // Backing for zero-element tensors, whose data pointer may be null.
  alignas(16) std::byte empty_[16] = {};
};

}  // namespace ortserve
