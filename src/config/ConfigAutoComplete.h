#pragma once
// Triton's config auto-complete for ONNX models: what a config.pbtxt leaves
// out is filled from the model's own signature.
#include "core/Status.h"
#include "model_config.pb.h"
#include "runtime/ModelSignature.h"

namespace ortserve {

// max_batch_size given to a batchable model whose config does not set it:
// Triton's --backend-config=onnxruntime,default-max-batch-size default.
inline constexpr int kDefaultMaxBatchSize = 4;

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

// Triton's ONNX Runtime backend auto-complete (AutoCompleteConfig,
// AutoCompleteMaxBatch, AutoCompleteIO) from the ONNX signature; a model
// without config.pbtxt starts from a config holding only its name:
//  - a config that lists inputs (or batch inputs) and outputs is left as it
//    is, except that a listed tensor without data_type or dims gets them
//    from the model (ortserve's; Triton refuses such a config);
//  - otherwise the model is batchable when every input and output has a
//    dynamic first dim. Batchable with max_batch_size 0: max_batch_size =
//    `default_max_batch_size`, and when that is above 1 and the config has
//    no sequence_batching, `dynamic_batching {}` is added (its preferred
//    size comes from NormalizeModelConfig). Not batchable with a non-zero
//    max_batch_size: kUnavailable "autofill failed for model ...";
//  - an empty input or output list is filled with every model tensor (name,
//    type, dims without the batch dim when max_batch_size > 0; a tensor of
//    shape [batch] gets dims [1] and reshape [] as Triton does), except
//    sequence_batching's control and state tensors: the server feeds them.
// Instance groups and the other defaults are NormalizeModelConfig's.
Status AutoCompleteConfig(const ModelSignature& signature, inference::ModelConfig* config,
                          int default_max_batch_size = kDefaultMaxBatchSize);

}  // namespace ortserve
