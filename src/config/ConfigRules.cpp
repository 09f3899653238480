#include "config/ConfigRules.h"

#include <set>
#include <string>
#include <vector>

namespace ortserve {
namespace {

constexpr int64_t kWildcardDim = -1;
// Triton's default --min-supported-compute-capability (TRITON_MIN_COMPUTE_CAPABILITY).
constexpr double kMinComputeCapability = 6.0;

// Triton's message: `rule` + " for " + model name, then ortserve's detail.
Status Broken(const std::string& rule, const inference::ModelConfig& config, const std::string& detail = "") {
  return Unavailable(rule + " for " + config.name() + (detail.empty() ? "" : " (" + detail + ")"));
}

// Element counts of the runs of fixed dims between -1s: [2, 4, -1, 6] has
// runs 8 and 6. Dims checked >= 1 or -1 before.
// Unsigned, so that absurd dims wrap instead of overflowing.
std::vector<uint64_t> FixedRunCounts(const google::protobuf::RepeatedField<int64_t>& dims) {
  std::vector<uint64_t> runs;
  uint64_t count = 1;
  for (int64_t d : dims) {
    if (d == kWildcardDim) {
      runs.push_back(count);
      count = 1;
    } else {
      count *= static_cast<uint64_t>(d);
    }
  }
  runs.push_back(count);
  return runs;
}

std::string DimsText(const google::protobuf::RepeatedField<int64_t>& dims) {
  std::string s = "[";
  for (int i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

template <typename Io>
Status CheckIoShape(const Io& io, const char* kind, const inference::ModelConfig& config) {
  const std::string prefix = std::string("model ") + kind + " ";
  if (io.name().empty()) return Broken(prefix + "must specify 'name'", config);
  const std::string named = prefix + "'" + io.name() + "' ";
  if (io.data_type() == inference::TYPE_INVALID) return Broken(named + "must specify 'data_type'", config);
  if (io.dims_size() == 0) return Broken(named + "must specify 'dims'", config);
  for (int64_t d : io.dims()) {
    if (d < 1 && d != kWildcardDim) {
      return Broken(named + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension", config,
                    "dims " + DimsText(io.dims()));
    }
  }
  if (!io.has_reshape()) return Status::Ok();
  const auto& reshape = io.reshape().shape();
  for (int64_t d : reshape) {
    if (d < 1 && d != kWildcardDim) {
      return Broken(named + "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension",
                    config, "reshape " + DimsText(reshape));
    }
  }
  const std::string both = "dims " + DimsText(io.dims()) + ", reshape " + DimsText(reshape);
  const std::vector<uint64_t> dims_runs = FixedRunCounts(io.dims());
  const std::vector<uint64_t> reshape_runs = FixedRunCounts(reshape);
  // An empty reshape (a scalar, per batch row when batching) stands for dims
  // [1]. Triton refuses it without batching ("scalar tensors are not
  // supported"); ortserve serves such models (e.g. Silero VAD's `sr`).
  if (reshape.empty()) {
    if (dims_runs != std::vector<uint64_t>{1}) {
      return Broken(named + "has different size for dims and reshape", config, both);
    }
    return Status::Ok();
  }
  const bool dims_variable = dims_runs.size() > 1;
  const bool reshape_variable = reshape_runs.size() > 1;
  if (dims_variable != reshape_variable || (!dims_variable && dims_runs != reshape_runs)) {
    return Broken(named + "has different size for dims and reshape", config, both);
  }
  if (dims_runs.size() != reshape_runs.size()) {
    return Broken(named + "has different number of variable-size dimensions for dims and reshape", config, both);
  }
  if (dims_runs != reshape_runs) return Broken(named + "has different size for dims and reshape", config, both);
  return Status::Ok();
}

Status CheckDynamicBatching(const inference::ModelConfig& config) {
  const auto& db = config.dynamic_batching();
  for (int size : db.preferred_batch_size()) {
    if (size <= 0) return Broken("dynamic batching preferred size must be positive", config, std::to_string(size));
    if (size > config.max_batch_size()) {
      return Broken("dynamic batching preferred size must be <= max batch size", config,
                    std::to_string(size) + " > max_batch_size " + std::to_string(config.max_batch_size()));
    }
  }
  const uint64_t levels = db.priority_levels();
  const std::string range = "[1, " + std::to_string(levels) + "]";
  if (levels != 0) {
    if (db.default_priority_level() == 0 || db.default_priority_level() > levels) {
      return Broken("default priority level must be in range " + range, config,
                    "default_priority_level " + std::to_string(db.default_priority_level()));
    }
    for (const auto& [level, policy] : db.priority_queue_policy()) {
      if (level == 0 || level > levels) {
        return Broken("priority queue policy must have priority level in range " + range, config,
                      "level " + std::to_string(level));
      }
    }
  }
  if (!db.preserve_ordering()) return Status::Ok();
  if (levels > 1) return Broken("Only one priority level is allowed when 'preserve_ordering' is true", config);
  auto delays = [](const inference::ModelQueuePolicy& p) {
    return p.default_timeout_microseconds() != 0 && p.timeout_action() == inference::ModelQueuePolicy::DELAY;
  };
  bool any_delay = delays(db.default_queue_policy());
  for (const auto& [level, policy] : db.priority_queue_policy()) any_delay = any_delay || delays(policy);
  if (any_delay) {
    return Broken("Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true", config);
  }
  return Status::Ok();
}

// Triton's ValidateBatchIO: each batch input's kind, source count and data
// type, each batch output's kind and source count, and the tensor names they
// refer to. `skip_gaps`: a name check against a list auto-complete will fill
// (no outputs listed) waits until it has.
Status CheckBatchIoRules(const inference::ModelConfig& config, bool skip_gaps) {
  std::set<std::string> inputs;
  std::set<std::string> outputs;
  for (const auto& input : config.input()) inputs.insert(input.name());
  for (const auto& output : config.output()) outputs.insert(output.name());
  auto check_sources = [&](const auto& sources) {
    for (const auto& source : sources) {
      if (!inputs.count(source)) return Broken("unknown source input name '" + source + "'", config);
    }
    return Status::Ok();
  };
  for (const auto& batch_input : config.batch_input()) {
    const std::string kind = inference::BatchInput::Kind_Name(batch_input.kind());
    if (batch_input.source_input_size() != 1) {
      return Broken("batch input kind '" + kind + "' expects 1 source input, got " +
                        std::to_string(batch_input.source_input_size()),
                    config);
    }
    if (batch_input.data_type() != inference::TYPE_INT32 && batch_input.data_type() != inference::TYPE_FP32) {
      return Broken("batch input data type must be TYPE_INT32 or TYPE_FP32", config,
                    "kind '" + kind + "' is " + inference::DataType_Name(batch_input.data_type()));
    }
    if (batch_input.target_name_size() == 0) {
      return Broken("batch input kind '" + kind + "' must specify 'target_name'", config);
    }
    ORTSERVE_RETURN_IF_ERROR(check_sources(batch_input.source_input()));
  }
  for (const auto& batch_output : config.batch_output()) {
    const std::string kind = inference::BatchOutput::Kind_Name(batch_output.kind());
    if (batch_output.source_input_size() != 1) {
      return Broken("batch output kind '" + kind + "' expects 1 source input, got " +
                        std::to_string(batch_output.source_input_size()),
                    config);
    }
    ORTSERVE_RETURN_IF_ERROR(check_sources(batch_output.source_input()));
    std::set<std::string> targets;
    for (const auto& target : batch_output.target_name()) {
      if (!(skip_gaps && config.output_size() == 0) && !outputs.count(target)) {
        return Broken("unknown target output name '" + target + "'", config);
      }
      if (!targets.insert(target).second) {
        return Broken("target output name '" + target + "' can only be specified once", config);
      }
    }
  }
  return Status::Ok();
}

// Triton's text, `gpu` in group `group`; what follows "are: " is ortserve's.
Status InvalidGpu(const inference::ModelInstanceGroup& group, int gpu, const inference::ModelConfig& config,
                  bool cuda_provider) {
  return Unavailable("instance group " + group.name() + " of model " + config.name() +
                     " specifies invalid or unsupported gpu id " + std::to_string(gpu) +
                     ". GPUs with at least the minimum required CUDA compute compatibility of " +
                     std::to_string(kMinComputeCapability) + " are: " +
                     (cuda_provider ? "those the CUDA provider opens (a negative id is never one)"
                                    : "none (this server's ONNX Runtime has no CUDA provider)"));
}

}  // namespace

Status CheckInstanceGroupGpus(const inference::ModelConfig& config, bool cuda_provider) {
  using Group = inference::ModelInstanceGroup;
  for (const auto& group : config.instance_group()) {
    for (int gpu : group.gpus()) {
      if (gpu < 0) return InvalidGpu(group, gpu, config, cuda_provider);
    }
  }
  for (const auto& group : config.instance_group()) {
    if (group.kind() == Group::KIND_CPU && group.gpus_size() > 0) {
      return Unavailable("instance group " + group.name() + " of model " + config.name() +
                         " has kind KIND_CPU but specifies one or more GPUs");
    }
    if (group.kind() == Group::KIND_GPU && !cuda_provider && group.gpus_size() > 0) {
      return InvalidGpu(group, group.gpus(0), config, cuda_provider);
    }
  }
  return Status::Ok();
}

Status CheckScalarReshapesWithoutFile(const inference::ModelConfig& config) {
  if (config.max_batch_size() != 0) return Status::Ok();
  auto check = [&](const auto& io, const char* kind) {
    if (!io.has_reshape() || io.reshape().shape_size() != 0) return Status::Ok();
    return Broken(std::string("model ") + kind + " '" + io.name() +
                      "' cannot have empty reshape for non-batching model as scalar tensors are not supported",
                  config, "ortserve serves a scalar only where the model file declares one; there is none");
  };
  for (const auto& input : config.input()) ORTSERVE_RETURN_IF_ERROR(check(input, "input"));
  for (const auto& output : config.output()) ORTSERVE_RETURN_IF_ERROR(check(output, "output"));
  return Status::Ok();
}

Status CheckModelConfigRules(const inference::ModelConfig& config) {
  if (config.max_batch_size() < 0) {
    return Broken("'max_batch_size' must be non-negative value", config,
                  "got " + std::to_string(config.max_batch_size()));
  }
  if (config.has_dynamic_batching()) ORTSERVE_RETURN_IF_ERROR(CheckDynamicBatching(config));
  return Status::Ok();
}

Status CheckModelIoRules(const inference::ModelConfig& config, bool skip_gaps) {
  auto has_gap = [](const auto& io) { return io.data_type() == inference::TYPE_INVALID || io.dims_size() == 0; };
  for (const auto& input : config.input()) {
    if (!(skip_gaps && has_gap(input))) ORTSERVE_RETURN_IF_ERROR(CheckIoShape(input, "input", config));
  }
  for (const auto& output : config.output()) {
    if (!(skip_gaps && has_gap(output))) ORTSERVE_RETURN_IF_ERROR(CheckIoShape(output, "output", config));
  }
  return CheckBatchIoRules(config, skip_gaps);
}

}  // namespace ortserve
