#include "config/SequenceConfig.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <set>

#include "config/ConfigParse.h"
#include "config/ConfigTypes.h"
#include "config/ModelFiles.h"
#include "config/RaggedConfig.h"
#include "config/RolloutConfig.h"
#include "config/RuntimeConfig.h"
#include "config/VersionWeights.h"
#include "core/Text.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;
using SB = inference::ModelSequenceBatching;
using Kind = ControlInput::Kind;

std::string ControlName(SB::Control::Kind kind) { return SB::Control::Kind_Name(kind); }

Kind FromConfigKind(SB::Control::Kind kind) {
  switch (kind) {
    case SB::Control::CONTROL_SEQUENCE_START: return Kind::kStart;
    case SB::Control::CONTROL_SEQUENCE_END: return Kind::kEnd;
    case SB::Control::CONTROL_SEQUENCE_READY: return Kind::kReady;
    default: return Kind::kCorrelationId;
  }
}

template <typename T>
void Store(T value, std::array<std::byte, 4>* into) {
  static_assert(sizeof(T) <= 4);
  std::memcpy(into->data(), &value, sizeof(T));
}

// START / END / READY: exactly one of the false/true lists, of 2 entries.
Status ReadBooleanControl(const SB::Control& c, const std::string& model, ControlInput* out) {
  const std::string kind = ControlName(c.kind());
  const int lists = (c.int32_false_true_size() > 0) + (c.fp32_false_true_size() > 0) + (c.bool_false_true_size() > 0);
  if (lists > 1) {
    return Unavailable("sequence batching specifies more than one of 'int32_false_true', 'fp32_false_true' and "
                       "'bool_false_true' for " + kind + " for " + model);
  }
  if (lists == 0) {
    return Unavailable("sequence batching must specify either 'int32_false_true', 'fp32_false_true' or "
                       "'bool_false_true' for " + kind + " for " + model);
  }
  const auto two = [&](int size, const char* field) {
    return size == 2 ? Status::Ok()
                     : Unavailable(std::string("sequence batching control '") + field +
                                   "' must have exactly 2 entries for " + kind + " for " + model);
  };
  if (c.int32_false_true_size() > 0) {
    ORTSERVE_RETURN_IF_ERROR(two(c.int32_false_true_size(), "int32_false_true"));
    out->dtype = DataType::kInt32;
    Store<int32_t>(c.int32_false_true(0), &out->false_value);
    Store<int32_t>(c.int32_false_true(1), &out->true_value);
  } else if (c.fp32_false_true_size() > 0) {
    ORTSERVE_RETURN_IF_ERROR(two(c.fp32_false_true_size(), "fp32_false_true"));
    out->dtype = DataType::kFp32;
    Store<float>(c.fp32_false_true(0), &out->false_value);
    Store<float>(c.fp32_false_true(1), &out->true_value);
  } else {
    ORTSERVE_RETURN_IF_ERROR(two(c.bool_false_true_size(), "bool_false_true"));
    out->dtype = DataType::kBool;
    Store<uint8_t>(c.bool_false_true(0) ? 1 : 0, &out->false_value);
    Store<uint8_t>(c.bool_false_true(1) ? 1 : 0, &out->true_value);
  }
  return Status::Ok();
}

Status ReadCorrelationControl(const SB::Control& c, const std::string& model, ControlInput* out) {
  if (c.int32_false_true_size() > 0 || c.fp32_false_true_size() > 0 || c.bool_false_true_size() > 0) {
    return Unavailable("sequence batching must not specify 'int32_false_true', 'fp32_false_true' or "
                       "'bool_false_true' for CONTROL_SEQUENCE_CORRID for " + model);
  }
  switch (c.data_type()) {
    case inference::TYPE_UINT64:
    case inference::TYPE_INT64:
    case inference::TYPE_UINT32:
    case inference::TYPE_INT32:
    case inference::TYPE_STRING:
      out->dtype = FromConfigDataType(c.data_type());
      return Status::Ok();
    default:
      return Unavailable("unexpected data type for control CONTROL_SEQUENCE_CORRID for " + model +
                         ". Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
                         " (got " + inference::DataType_Name(c.data_type()) + ")");
  }
}

Status ReadControls(const inference::ModelConfig& config, SequencePolicy* policy) {
  const std::string& model = config.name();
  std::set<std::string> tensors;
  std::set<int> kinds;
  for (const SB::ControlInput& input : config.sequence_batching().control_input()) {
    if (input.name().empty()) return Unavailable("sequence batching control tensor must have a name for " + model);
    if (!tensors.insert(input.name()).second) {
      return Unavailable("sequence batching control tensor '" + input.name() +
                         "' is specified for multiple control kinds for " + model);
    }
    if (input.control_size() != 1) {
      return Unavailable("sequence_batching.control_input '" + input.name() + "' of " + model + " lists " +
                         std::to_string(input.control_size()) + " controls; each control needs an input of its own");
    }
    const SB::Control& c = input.control(0);
    if (!kinds.insert(c.kind()).second) {
      return Unavailable("sequence batching specifies multiple " + ControlName(c.kind()) + " tensors for " + model);
    }
    ControlInput control;
    control.name = input.name();
    control.kind = FromConfigKind(c.kind());
    ORTSERVE_RETURN_IF_ERROR(control.kind == Kind::kCorrelationId ? ReadCorrelationControl(c, model, &control)
                                                                  : ReadBooleanControl(c, model, &control));
    policy->controls.push_back(std::move(control));
  }
  return Status::Ok();
}

// One sequence's initial_state bytes (zeros: empty).
Result<TensorData> ReadInitialState(const SB::State& state, const StateTensor& tensor, const fs::path& model_dir) {
  const SB::InitialState& initial = state.initial_state(0);
  const std::string& input = state.input_name();
  if (initial.data_type() != state.data_type()) {
    return Unavailable("The data type used for 'initial_state' field of state '" + input +
                       "' does not match the state data type.");
  }
  if (initial.name().empty()) {
    return Unavailable("Field 'name' must be set when using initial_state for state input '" + input + "'.");
  }
  if (initial.dims_size() != state.dims_size()) {
    return Unavailable("Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for "
                       "state input '" + input + "'. " + std::to_string(initial.dims_size()) +
                       " != " + std::to_string(state.dims_size()));
  }
  for (int d = 0; d < initial.dims_size(); ++d) {
    if (initial.dims(d) < 0) {
      return Unavailable("'initial_state' field for state input name '" + input + "' contains variable dimensions.");
    }
    if (initial.dims(d) != state.dims(d)) {
      return Unavailable("'initial_state' dim for input name '" + input + "' doesn't match 'state' dim description. " +
                         std::to_string(initial.dims(d)) + " != " + std::to_string(state.dims(d)));
    }
  }
  if (initial.state_data_case() == SB::InitialState::kZeroData) return TensorData();
  if (initial.state_data_case() != SB::InitialState::kDataFile) {
    return Unavailable("initial_state setting expects state '" + input + "' to have state_data set");
  }
  auto path = ResolveInside(model_dir / kInitialStateFolder, initial.data_file());
  if (!path.ok()) return Unavailable("initial_state of state '" + input + "': " + path.status().message());
  auto text = ReadFile(path.value());
  if (!text.ok()) return Unavailable("initial_state of state '" + input + "': " + text.status().message());
  const size_t bytes = static_cast<size_t>(FixedByteSize(tensor.dtype, tensor.dims).value_or(0));
  if (text->size() < bytes) {
    return Unavailable("initial_state setting expects " + std::to_string(bytes) + " bytes, but the data provided from " +
                       initial.data_file() + " only has " + std::to_string(text->size()) + " bytes.");
  }
  if (text->size() > bytes) {
    spdlog::warn("model '{}': initial_state file {} has {} bytes; the state uses the first {}", tensor.input_name,
                 initial.data_file(), text->size(), bytes);
  }
  return TensorData::Copy(text->data(), bytes);
}

Status ReadStates(const inference::ModelConfig& config, const fs::path& model_dir, SequencePolicy* policy) {
  std::set<std::string> inputs;
  for (const SB::State& state : config.sequence_batching().state()) {
    const std::string what = "sequence_batching.state '" + state.input_name() + "' of " + config.name();
    if (state.input_name().empty() || state.output_name().empty()) {
      return Unavailable("sequence_batching.state of " + config.name() + ": input_name and output_name must both be set");
    }
    if (!inputs.insert(state.input_name()).second) {
      return Unavailable("State input name '" + state.input_name() + "' specified more than once.");
    }
    StateTensor tensor;
    tensor.input_name = state.input_name();
    tensor.output_name = state.output_name();
    tensor.dtype = FromConfigDataType(state.data_type());
    if (DataTypeSize(tensor.dtype) == 0) {
      return Unavailable(what + ": data_type " + inference::DataType_Name(state.data_type()) +
                         " is not supported (implicit state needs a fixed-size type)");
    }
    tensor.dims = ConfigDims(state.dims());
    for (int64_t d : tensor.dims) {
      if (d < 1) {
        return Unavailable(what + ": dims " + ShapeToString(tensor.dims) +
                           " must all be positive (a state of variable size is not supported)");
      }
    }
    if (!FixedByteSize(tensor.dtype, tensor.dims)) return Unavailable(what + ": dims " + ShapeToString(tensor.dims) + " are too large");
    if (state.initial_state_size() > 1) {
      return Unavailable("initial_state field for state input '" + state.input_name() +
                         "' must contain exactly one or zero element. Found '" +
                         std::to_string(state.initial_state_size()) + "' elements.");
    }
    if (state.initial_state_size() == 1) {
      auto initial = ReadInitialState(state, tensor, model_dir);
      if (!initial.ok()) return initial.status();
      tensor.initial = std::move(initial).value();
    }
    policy->states.push_back(std::move(tensor));
  }
  return Status::Ok();
}

// The strategy's fields into `options` (the batching policy and the slots).
Status ReadStrategy(const inference::ModelConfig& config, SequenceBatcherOptions* options) {
  const SB& sb = config.sequence_batching();
  const int max_batch = config.max_batch_size();
  BatchingPolicy& b = options->batcher.batching;
  SequencePolicy& s = options->sequence;
  s.slots_per_instance = static_cast<uint32_t>(std::max(1, max_batch));
  if (!sb.has_oldest()) {
    s.strategy = SequencePolicy::Strategy::kDirect;
    b.max_queue_delay_us = sb.direct().max_queue_delay_microseconds();
    s.minimum_slot_utilization = sb.direct().minimum_slot_utilization();
    if (s.minimum_slot_utilization < 0.0f || s.minimum_slot_utilization > 1.0f) {
      return Unavailable("sequence batching minimum slot utilization must be in range (0.0, 1.0] for " + config.name());
    }
    // batch_window is checked as for oldest, though direct has no window to adapt.
    if (auto adaptive = ReadAdaptiveWindow(config); !adaptive.ok()) return adaptive.status();
    b.adaptive_window = false;
    return Status::Ok();
  }
  const SB::StrategyOldest& oldest = sb.oldest();
  s.strategy = SequencePolicy::Strategy::kOldest;
  b.dynamic_batching = true;
  if (oldest.max_candidate_sequences() < 0 || oldest.max_candidate_sequences() > kMaxSequenceSlotsPerInstance) {
    return Unavailable("sequence_batching.oldest.max_candidate_sequences " + std::to_string(oldest.max_candidate_sequences()) +
                       " of " + config.name() + " is outside [0, " + std::to_string(kMaxSequenceSlotsPerInstance) + "]");
  }
  if (oldest.max_candidate_sequences() > 0) s.slots_per_instance = static_cast<uint32_t>(oldest.max_candidate_sequences());
  for (int p : oldest.preferred_batch_size()) {
    if (p <= 0) return Unavailable("sequence batching preferred batch size must be positive for " + config.name());
    if (p > max_batch) {
      return Unavailable("sequence batching preferred batch size must be <= max batch size for " + config.name());
    }
    b.preferred_batch_sizes.push_back(p);
  }
  b.max_queue_delay_us = oldest.max_queue_delay_microseconds();
  auto adaptive = ReadAdaptiveWindow(config);
  if (!adaptive.ok()) return adaptive.status();
  b.adaptive_window = adaptive.value();
  return Status::Ok();
}

Status ReadRestart(const inference::ModelConfig& config, SequencePolicy* policy) {
  auto it = config.parameters().find(kSequenceRestartParameter);
  if (it == config.parameters().end()) return Status::Ok();
  const std::string& value = it->second.string_value();
  if (value != "allow" && value != "reject") {
    return Unavailable(std::string("parameter '") + kSequenceRestartParameter + "' must be 'allow' or 'reject', got '" +
                       value + "'");
  }
  policy->running_start =
      value == "reject" ? SequencePolicy::RunningStart::kReject : SequencePolicy::RunningStart::kRestart;
  return Status::Ok();
}

// The model's shape of a tensor the server feeds one row of `dims` per
// request: [batch] + dims (or dims without a batch dim), -1 matching any.
bool FedShapeMatches(const TensorSignature& sig, Shape dims, bool batching) {
  if (batching) dims.insert(dims.begin(), -1);
  if (sig.shape.size() != dims.size()) return false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != -1 && sig.shape[i] >= 0 && sig.shape[i] != dims[i]) return false;
  }
  return !batching || sig.shape[0] < 0;
}

std::string FedShape(Shape dims, bool batching) {
  if (batching) dims.insert(dims.begin(), -1);
  return ShapeToString(dims);
}

std::string InputNames(const ModelSignature& signature) {
  std::vector<std::string> names;
  for (const auto& t : signature.inputs) names.push_back(t.name);
  return Join(names);
}

// `name` is a model input the config's input list leaves to the server, of
// `dtype` and one row of `dims` per request.
Status CheckFedInput(const inference::ModelConfig& config, const ModelSignature& signature, const std::string& what,
                     const std::string& name, DataType dtype, const Shape& dims) {
  const bool batching = config.max_batch_size() > 0;
  const TensorSignature* sig = FindTensor(signature.inputs, name);
  if (sig == nullptr) {
    return Unavailable(what + " '" + name + "' is not an input of the model (model inputs: " + InputNames(signature) +
                       ")");
  }
  for (const auto& input : config.input()) {
    if (input.name() == name) {
      return Unavailable(what + " '" + name + "' is also listed in input: the server feeds it, so leave it out of "
                         "input");
    }
  }
  if (sig->dtype != dtype) {
    return Unavailable(what + " '" + name + "' is " + std::string(DataTypeName(dtype)) + " but the model's input is " +
                       std::string(DataTypeName(sig->dtype)));
  }
  if (!FedShapeMatches(*sig, dims, batching)) {
    return Unavailable(what + " '" + name + "': the model's input has shape " + ShapeToString(sig->shape) +
                       ", the server feeds " + FedShape(dims, batching));
  }
  return Status::Ok();
}

}  // namespace

Status CheckSequenceTensors(const inference::ModelConfig& config, const ModelSignature& signature) {
  if (!config.has_sequence_batching()) return Status::Ok();
  const bool batching = config.max_batch_size() > 0;
  for (const SB::ControlInput& input : config.sequence_batching().control_input()) {
    if (input.control_size() != 1) continue;  // MakeSequenceBatcherOptions says why
    const SB::Control& c = input.control(0);
    ControlInput control;
    const Status read = FromConfigKind(c.kind()) == Kind::kCorrelationId
                            ? ReadCorrelationControl(c, config.name(), &control)
                            : ReadBooleanControl(c, config.name(), &control);
    ORTSERVE_RETURN_IF_ERROR(read);
    ORTSERVE_RETURN_IF_ERROR(CheckFedInput(config, signature, "sequence_batching control input (" +
                                           ControlName(c.kind()) + ")", input.name(), control.dtype, {1}));
  }
  for (const SB::State& state : config.sequence_batching().state()) {
    const DataType dtype = FromConfigDataType(state.data_type());
    const Shape dims = ConfigDims(state.dims());
    ORTSERVE_RETURN_IF_ERROR(
        CheckFedInput(config, signature, "sequence_batching.state input_name", state.input_name(), dtype, dims));
    const TensorSignature* out = FindTensor(signature.outputs, state.output_name());
    if (out == nullptr) {
      return Unavailable("sequence_batching.state output_name '" + state.output_name() +
                         "' is not an output of the model");
    }
    if (out->dtype != dtype) {
      return Unavailable("sequence_batching.state output_name '" + state.output_name() + "' is " +
                         std::string(DataTypeName(dtype)) + " but the model's output is " +
                         std::string(DataTypeName(out->dtype)));
    }
    // ORT reports rank 0 for an output whose shape it cannot infer; the run checks it then.
    if (!out->shape.empty() && !FedShapeMatches(*out, dims, batching)) {
      return Unavailable("sequence_batching.state output_name '" + state.output_name() + "': the model's output has shape " +
                         ShapeToString(out->shape) + ", the state is " + FedShape(dims, batching));
    }
  }
  return Status::Ok();
}

bool IsServerFedInput(const inference::ModelConfig& config, const std::string& name) {
  if (IsBatchInputTarget(config, name)) return true;
  if (!config.has_sequence_batching()) return false;
  for (const auto& c : config.sequence_batching().control_input())
    if (c.name() == name) return true;
  for (const auto& s : config.sequence_batching().state())
    if (s.input_name() == name) return true;
  return false;
}

bool IsStateOutput(const inference::ModelConfig& config, const std::string& name) {
  if (!config.has_sequence_batching()) return false;
  for (const auto& s : config.sequence_batching().state())
    if (s.output_name() == name) return true;
  return false;
}

std::string DescribeServerFedInput(const inference::ModelConfig& config, const std::string& name) {
  if (IsBatchInputTarget(config, name)) return "a batch input, which the server makes for each batch it forms";
  for (const auto& c : config.sequence_batching().control_input()) {
    if (c.name() != name) continue;
    const std::string kind = c.control_size() > 0 ? ControlName(c.control(0).kind()) : "control";
    return "the sequence batcher's control input " + kind +
           ", which the server fills from the request's sequence_id, sequence_start and sequence_end";
  }
  for (const auto& s : config.sequence_batching().state()) {
    if (s.input_name() == name) return "an implicit state input, which the server feeds from the sequence's last '" +
                                       s.output_name() + "'";
  }
  return "fed by the server";
}

Result<SequenceBatcherOptions> MakeSequenceBatcherOptions(const inference::ModelConfig& config,
                                                          const std::string& version, const fs::path& model_dir) {
  const SB& sb = config.sequence_batching();
  if (sb.iterative_sequence()) {
    return Unavailable("sequence_batching.iterative_sequence is not supported: it needs a backend that reschedules "
                       "requests, which ONNX models do not");
  }
  if (!FallbackModelName(config).empty()) {
    return Unavailable(std::string("parameter '") + kFallbackModelParameter +
                       "' cannot be used with sequence_batching: every request of a sequence must run on the model "
                       "that holds its state");
  }
  if (config.parameters().count(kVersionWeightsParameter) > 0) {
    return Unavailable(std::string("parameter '") + kVersionWeightsParameter +
                       "' cannot be used with sequence_batching: it splits requests one by one, and every request "
                       "of a sequence must reach the version that holds its state");
  }
  for (const auto& [key, value] : config.parameters()) {
    if (IsRolloutParameter(key)) {
      return Unavailable("parameter '" + key +
                         "' cannot be used with sequence_batching: a rollout splits requests one by one, and every "
                         "request of a sequence must reach the version that holds its state");
    }
  }
  SequenceBatcherOptions options;
  options.batcher.model_name = config.name();
  options.batcher.model_version = version;
  options.batcher.batching.max_batch_size = config.max_batch_size();
  options.sequence.max_sequence_idle_us =
      sb.max_sequence_idle_microseconds() > 0 ? sb.max_sequence_idle_microseconds() : kDefaultSequenceIdleUs;
  ORTSERVE_RETURN_IF_ERROR(ReadStrategy(config, &options));
  ORTSERVE_RETURN_IF_ERROR(ReadRestart(config, &options.sequence));
  ORTSERVE_RETURN_IF_ERROR(ReadControls(config, &options.sequence));
  ORTSERVE_RETURN_IF_ERROR(ReadStates(config, model_dir, &options.sequence));
  for (const StateTensor& s : options.sequence.states) {
    for (const ControlInput& c : options.sequence.controls) {
      if (c.name == s.input_name) {
        return Unavailable("sequence_batching of " + config.name() + ": input '" + c.name +
                           "' is both a control input and a state input");
      }
    }
  }
  if (Status valid = options.Validate(); !valid.ok()) return Unavailable(valid.message());
  return options;
}

}  // namespace ortserve
