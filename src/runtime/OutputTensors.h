#pragma once
// Turns the ORT values a Run produced into core Tensors.
#include <onnxruntime_cxx_api.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"
#include "core/Tensor.h"

namespace ortserve {

// Appends one Tensor per value (same order) to `outputs`. Fixed-size outputs
// are zero-copy: their TensorData views ORT's buffer and shares ownership of
// `values`, so the memory lives exactly as long as some output still uses
// it. BYTES outputs are serialized to the length-prefixed format (ORT keeps
// std::strings, which cannot be viewed in that format). Fails (Unsupported)
// for a non-tensor value or an element type KServe cannot carry. May throw
// Ort::Exception.
Status ExportOutputs(const std::shared_ptr<std::vector<Ort::Value>>& values,
                     const std::vector<std::string>& names, std::string_view model,
                     std::vector<Tensor>* outputs);

}  // namespace ortserve
