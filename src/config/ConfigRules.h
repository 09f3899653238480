#pragma once
// Triton's config rules that need no model file (core's ValidateModelConfig
// and ValidateModelIOConfig), checked as soon as a config is read so that a
// config error is never hidden behind a missing version directory or model
// file. Each message starts with Triton's own text, which Triton's tools
// look for (qa/L0_model_config), and ends with ortserve's detail.
#include "core/Status.h"
#include "model_config.pb.h"

namespace ortserve {

// The whole-model rules: max_batch_size, preferred batch sizes, priority
// levels, preserve_ordering. kUnavailable with the reason; Ok otherwise.
Status CheckModelConfigRules(const inference::ModelConfig& config);

// Each config input's and output's name, data_type, dims and reshape
// (Triton's ValidateIOShape), then the batch_input and batch_output entries
// (Triton's ValidateBatchIO: kinds, source counts, data types, the names they
// refer to). `skip_gaps`: a tensor without data_type or dims, or an output
// list auto-complete will fill, is checked again once it has run.
Status CheckModelIoRules(const inference::ModelConfig& config, bool skip_gaps = false);

// The GPU ids of each instance_group, in Triton's words (core's
// ValidateInstanceGroup), after normalisation (KIND_AUTO is KIND_CPU here).
// A negative id, never a device, is refused first, in whichever group; then
// group by group: a KIND_CPU group naming GPUs, and a KIND_GPU group naming
// any id when `cuda_provider` is false (no GPU can be used, so every id is
// unsupported). With the CUDA provider, whether a device exists is the
// provider's answer when a session is made on it.
Status CheckInstanceGroupGpus(const inference::ModelConfig& config, bool cuda_provider);

// Triton refuses an empty `reshape` without batching ("model input 'x' cannot
// have empty reshape for non-batching model as scalar tensors are not
// supported for m"). ortserve serves one where the model file declares that
// tensor a scalar (ConfigChecks); this is Triton's refusal where there is no
// model file to show it, so that a config error is not reported as a missing
// file.
Status CheckScalarReshapesWithoutFile(const inference::ModelConfig& config);

}  // namespace ortserve
