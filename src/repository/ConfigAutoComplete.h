#pragma once
// Triton's config auto-complete for ONNX models: what a config.pbtxt leaves
// out is filled from the model's own signature.
#include "model_config.pb.h"
#include "runtime/ModelSignature.h"

namespace ortserve {

// max_batch_size given to a model whose config does not set it (or that has no
// config) when every input and output has a dynamic first dimension. Triton's
// onnxruntime backend uses --backend-config=default-max-batch-size (4 there);
// ortserve's documented default is 8: large enough for dynamic batching to pay
// off on CPU, small enough that a batch adds little latency.
inline constexpr int kDefaultMaxBatchSize = 8;

// Whether and how configs are completed, from the command line.
struct AutoCompletePolicy {
  // false (Triton's --disable-auto-complete-config, or --strict-model-config
  // true): nothing is filled; a model needs a config.pbtxt that lists its
  // inputs and outputs.
  bool enabled = true;
  // The max_batch_size given to a batchable model (Triton's
  // --backend-config=default-max-batch-size=N); 0: it does not batch.
  int default_max_batch_size = kDefaultMaxBatchSize;
};

// Triton's auto-complete from the ONNX signature (a model without
// config.pbtxt starts from a config holding only its name):
//  - no inputs and no outputs in the config and max_batch_size 0: the model is
//    batchable when every input and output has a dynamic first dim; then
//    max_batch_size = `default_max_batch_size` and, when that is above 1,
//    dynamic_batching is enabled (as Triton's onnxruntime backend).
//  - missing inputs/outputs are filled (name, type, dims without the batch dim
//    when max_batch_size > 0; a tensor of shape [batch] gets dims [1] and
//    reshape [] as Triton does). Entries without data_type or dims are filled.
//  - sequence_batching's control and state inputs and its state outputs are
//    never added: the server feeds them (as Triton).
//  - no instance_group: one KIND_CPU instance.
void AutoCompleteConfig(const ModelSignature& signature, inference::ModelConfig* config,
                        int default_max_batch_size = kDefaultMaxBatchSize);

}  // namespace ortserve
