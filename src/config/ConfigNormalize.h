#pragma once
// Triton's normalisation of a model config (core's NormalizeModelConfig and
// NormalizeInstanceGroup, and the ONNX part of AutoCompleteBackendFields):
// the defaults a served config shows in GET /v2/models/{m}/config, filled
// whether or not auto-complete is on. Idempotent.
#include "model_config.pb.h"

namespace ortserve {

// Instances of an instance_group that gives no count: Triton's default for
// the ONNX Runtime backend (SetDefaultInstanceCount), 2 on CPU, 1 per GPU.
inline constexpr int kDefaultCpuInstanceCount = 2;
inline constexpr int kDefaultGpuInstanceCount = 1;

// Fills, where the config leaves them out:
//  - version_policy: latest { num_versions: 1 };
//  - dynamic_batching / sequence_batching.oldest preferred_batch_size:
//    [max_batch_size] when max_batch_size > 0;
//  - sequence_batching.max_sequence_idle_microseconds: 1 s;
//  - optimization input/output_pinned_memory { enable: true };
//  - default_model_filename "model.onnx";
//  - instance_group: one group named after the model when there is none;
//    each group's name (<model>_<index>), kind (KIND_AUTO resolves to
//    KIND_CPU: ortserve puts a model on a GPU only when told, as Triton on a
//    machine without one) and count (kDefault*InstanceCount).
// Platform and backend are CheckPlatform's (config/ConfigChecks.h).
void NormalizeModelConfig(inference::ModelConfig* config);

}  // namespace ortserve
