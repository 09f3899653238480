#pragma once
// Joins the inputs of a batch of requests along dim 0 and splits the outputs
// back. A batch of one request is passed through untouched (no copy); output
// slices share the output's buffer (no copy), for BYTES as well.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "core/Tensor.h"
#include "scheduler/RaggedBatch.h"

namespace ortserve {

// The input of `request` named `name`, looked for at index `hint` first
// (requests of one model usually list their inputs in the same order);
// null when it has none.
const Tensor* FindInput(const InferenceRequest& request, const std::string& name, size_t hint = 0);

// True if `a` and `b` can run in one batch: the same input names, and per
// name the same dtype and the same dims after dim 0 (any dims for an input
// `ragged` names).
bool CanStack(const InferenceRequest& a, const InferenceRequest& b, const RaggedBatching* ragged = nullptr);

// One per worker: keeps the stacking buffers to reuse them on the next batch
// (a buffer is reused only once nothing else holds it).
class TensorStacker {
 public:
  // Fills `batched` with one tensor per input of requests[0], in its order,
  // whose dim 0 is the sum over the requests. Requests must be CanStack with
  // requests[0] and have a batch dim (or be a single request). An input
  // `ragged` names is instead one 1-D tensor of all the requests' elements.
  Status Stack(const std::vector<const InferenceRequest*>& requests, std::vector<Tensor>* batched,
               const RaggedBatching* ragged = nullptr);

  // Splits each output along dim 0: request i gets `rows[i]` rows, in order.
  // (*parts)[i][j] is request i's share of outputs[j]. kInternal, naming the
  // output, when an output's dim 0 is not the sum of `rows` or its data does
  // not match its shape.
  static Status Split(const std::vector<Tensor>& outputs, const std::vector<uint64_t>& rows,
                      std::vector<std::vector<Tensor>>* parts);

 private:
  std::vector<std::shared_ptr<std::vector<std::byte>>> buffers_;  // one per input
};

}  // namespace ortserve
