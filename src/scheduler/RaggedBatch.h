#pragma once
// Triton's ragged batching, as its ONNX Runtime backend does it:
//  - an input marked allow_ragged_batch joins a batch whatever its shape;
//    the batch feeds the model one 1-D tensor of every request's elements,
//    concatenated in batch order (TensorStacker, asked by IsRagged);
//  - each batch input (config batch_input) is a tensor the server makes per
//    batch from the requests' shapes of its source input, fed to the model
//    under each target name;
//  - each batch output (BATCH_SCATTER_WITH_INPUT_SHAPE) is cut back into one
//    piece per request, in the shape of that request's source input.
// A model without any of these has an empty RaggedBatching and batches as
// before.
#include <string>
#include <vector>

#include "core/DataType.h"
#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "core/Tensor.h"

namespace ortserve {

// Triton's BatchInput kinds. Element counts are of the source input's whole
// tensor in one request (its batch dim included).
enum class BatchInputKind {
  kElementCount,                     // [requests]: each request's count
  kAccumulatedElementCount,          // [requests]: running sums (each request's end offset)
  kAccumulatedElementCountWithZero,  // [requests + 1]: 0, then the running sums
  kMaxElementCountAsShape,           // [largest count], zeros: only its shape tells
  kItemShape,                        // [batch items, rank - 1]: each item's dims after dim 0
  kItemShapeFlatten,                 // the same, 1-D
};

struct BatchInputSpec {
  BatchInputKind kind = BatchInputKind::kElementCount;
  std::vector<std::string> targets;  // the model inputs it is fed as
  DataType dtype = DataType::kInt32;  // kInt32 or kFp32
  std::string source;                 // the request input it describes
};

struct BatchOutputSpec {
  std::vector<std::string> targets;  // the model outputs scattered
  std::string source;                // the request input whose shape each piece takes
};

struct RaggedBatching {
  std::vector<std::string> ragged_inputs;
  std::vector<BatchInputSpec> batch_inputs;
  std::vector<BatchOutputSpec> batch_outputs;

  bool empty() const { return ragged_inputs.empty() && batch_inputs.empty() && batch_outputs.empty(); }
  bool IsRagged(const std::string& input) const;
  // The source input `output` is scattered by; null when it is split by rows.
  const std::string* ScatterSource(const std::string& output) const;
};

// Appends to `inputs` one tensor per target of each batch input, made from
// `requests` (the batch, in order). kInvalidArgument when a request lacks a
// source input or its shape has no batch dim where the kind needs one.
Status AppendBatchInputs(const RaggedBatching& ragged, const std::vector<const InferenceRequest*>& requests,
                         std::vector<Tensor>* inputs);

// Splits each output of the batch per request: a batch output by its source
// input's shapes, the others along dim 0 by `rows` (TensorStacker::Split).
// `names[j]` names outputs[j]. (*parts)[i][j] is request i's share of
// outputs[j]. kInternal, naming the output, when its elements do not add up.
Status SplitRaggedOutputs(const RaggedBatching& ragged, const std::vector<Tensor>& outputs,
                          const std::vector<std::string>& names, const std::vector<uint64_t>& rows,
                          const std::vector<const InferenceRequest*>& requests,
                          std::vector<std::vector<Tensor>>* parts);

}  // namespace ortserve
