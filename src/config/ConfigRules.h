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

}  // namespace ortserve
