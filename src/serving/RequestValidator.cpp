#include "serving/RequestValidator.h"

#include <algorithm>
#include <string>

#include "config/ConfigTypes.h"
#include "config/SequenceConfig.h"
#include "serving/Classification.h"

namespace ortserve {
namespace {

std::string ModelLabel(const inference::ModelConfig& config) { return "model '" + config.name() + "'"; }

std::string InputNames(const inference::ModelConfig& config) {
  std::string s;
  for (const auto& in : config.input()) s += (s.empty() ? "" : ", ") + in.name();
  return s;
}

std::string OutputNames(const inference::ModelConfig& config) {
  std::string s;
  for (const auto& out : config.output()) s += (s.empty() ? "" : ", ") + out.name();
  return s;
}

const inference::ModelInput* FindInput(const inference::ModelConfig& config, const std::string& name) {
  for (const auto& in : config.input()) {
    if (in.name() == name) return &in;
  }
  return nullptr;
}

const inference::ModelOutput* FindOutput(const inference::ModelConfig& config,
                                         const std::string& name) {
  for (const auto& out : config.output()) {
    if (out.name() == name) return &out;
  }
  return nullptr;
}

// [batch] + reshape, or reshape alone; -1s resolved from the element count.
template <typename T>
Status Reshape(const T& config_tensor, bool batching, Tensor* tensor) {
  Shape target = ConfigDims(config_tensor.reshape().shape());
  Shape from = tensor->shape;
  if (batching) {
    if (from.empty()) return InvalidArgument("tensor '" + tensor->name + "' has no batch dim");
    target.insert(target.begin(), from[0]);
  }
  auto reshaped = ReshapeDims(from, target);
  if (!reshaped.ok()) {
    return InvalidArgument("tensor '" + tensor->name + "': " + reshaped.status().message());
  }
  tensor->shape = std::move(reshaped).value();
  return Status::Ok();
}

// Whether one of the first `count` items is named `name`. Callers have checked
// each of those items is a distinct config tensor, so the scan is bounded by
// the config, not by what a request sends.
template <typename Items>
bool NamedAmong(const Items& items, size_t count, const std::string& name) {
  return std::any_of(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(count),
                     [&name](const auto& item) { return item.name == name; });
}

}  // namespace

namespace {

// An input the config does not list; a sequence model's control and state
// inputs are the server's to fill, and the message says so.
Status UnexpectedInput(const inference::ModelConfig& config, const std::string& name) {
  if (IsServerFedInput(config, name)) {
    return InvalidArgument("input '" + name + "' for " + ModelLabel(config) + " is " +
                           DescribeServerFedInput(config, name) + "; a request must not send it (inputs: " +
                           InputNames(config) + ")");
  }
  return InvalidArgument("unexpected input '" + name + "' for " + ModelLabel(config) + " (inputs: " +
                         InputNames(config) + ")");
}

// The checks of one input `t` against its config entry `in`. `batch` carries
// the batch size (and the input that set it) from one input to the next.
struct BatchSeen {
  int64_t size = -1;
  const Tensor* input = nullptr;
};

Status ValidateInputShape(const inference::ModelConfig& config, const inference::ModelInput& in, const Tensor& t,
                          BatchSeen* batch) {
  const auto model = [&config] { return ModelLabel(config); };
  const int max_batch = config.max_batch_size();
  // The config's dims, after a batch dimension of any size when batching.
  const size_t lead = max_batch > 0 ? 1 : 0;
  const auto expected = [&] {
    Shape shape = ConfigDims(in.dims());
    if (lead) shape.insert(shape.begin(), -1);
    return shape;
  };
  if (t.shape.size() != lead + static_cast<size_t>(in.dims_size())) {
    return InvalidArgument("input '" + t.name + "' for " + model() + ": expected rank " +
                           std::to_string(lead + in.dims_size()) + " (shape " + ShapeToString(expected()) +
                           "), got shape " + ShapeToString(t.shape));
  }
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const int64_t want = d < lead ? -1 : in.dims(static_cast<int>(d - lead));
    if (t.shape[d] < 0 || (want >= 0 && t.shape[d] != want)) {
      return InvalidArgument("input '" + t.name + "' for " + model() + ": expected shape " +
                             ShapeToString(expected()) + ", got " + ShapeToString(t.shape));
    }
  }
  if (max_batch == 0) return Status::Ok();
  const int64_t b = t.shape[0];
  if (b < 1 || b > max_batch) {
    return InvalidArgument("input '" + t.name + "' for " + model() + ": batch size " + std::to_string(b) +
                           " is outside [1, " + std::to_string(max_batch) + "] (max_batch_size " +
                           std::to_string(max_batch) + ")");
  }
  if (batch->size < 0) {
    batch->size = b;
    batch->input = &t;
  } else if (b != batch->size) {
    return InvalidArgument("inputs of " + model() + " disagree on batch size: '" + batch->input->name +
                           "' has " + std::to_string(batch->size) + ", '" + t.name + "' has " +
                           std::to_string(b));
  }
  return Status::Ok();
}

// The data must be exactly what the shape says: the one check of it for
// both front ends, whose decoders frame tensors without walking them.
Status ValidateInputData(const inference::ModelConfig& config, const Tensor& t) {
  const auto model = [&config] { return ModelLabel(config); };
  const auto count = ElementCount(t.shape);
  if (!count) {
    return InvalidArgument("input '" + t.name + "' for " + model() + ": invalid shape " + ShapeToString(t.shape));
  }
  if (t.dtype == DataType::kBytes) {
    const auto elements = CountBytesElements(t.data.data(), t.data.size());
    if (!elements) {
      return InvalidArgument("input '" + t.name + "' for " + model() +
                             ": malformed BYTES data (a length prefix runs past the end or bytes are left over)");
    }
    if (*elements != *count) {
      return InvalidArgument("input '" + t.name + "' for " + model() + ": shape " + ShapeToString(t.shape) +
                             " needs " + std::to_string(*count) + " BYTES elements, got " +
                             std::to_string(*elements));
    }
    return Status::Ok();
  }
  const auto bytes = FixedByteSize(t.dtype, t.shape);
  if (!bytes || *bytes != t.data.size()) {
    return InvalidArgument("input '" + t.name + "' for " + model() + ": shape " + ShapeToString(t.shape) +
                           " of " + std::string(DataTypeName(t.dtype)) + " needs " +
                           (bytes ? std::to_string(*bytes) : std::string("?")) + " bytes, got " +
                           std::to_string(t.data.size()));
  }
  return Status::Ok();
}

Status ValidateInputs(const inference::ModelConfig& config, const InferenceRequest& request) {
  const auto model = [&config] { return ModelLabel(config); };
  BatchSeen batch;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const Tensor& t = request.inputs[i];
    const inference::ModelInput* in = FindInput(config, t.name);
    if (in == nullptr) return UnexpectedInput(config, t.name);
    if (NamedAmong(request.inputs, i, t.name)) {
      return InvalidArgument("input '" + t.name + "' given more than once for " + model());
    }
    const DataType expected_type = FromConfigDataType(in->data_type());
    if (t.dtype != expected_type) {
      return InvalidArgument("input '" + t.name + "' for " + model() + ": expected datatype " +
                             std::string(DataTypeName(expected_type)) + ", got " + std::string(DataTypeName(t.dtype)));
    }
    ORTSERVE_RETURN_IF_ERROR(ValidateInputShape(config, *in, t, &batch));
    ORTSERVE_RETURN_IF_ERROR(ValidateInputData(config, t));
  }
  for (const auto& in : config.input()) {
    if (!in.optional() && !NamedAmong(request.inputs, request.inputs.size(), in.name())) {
      return InvalidArgument("missing input '" + in.name() + "' for " + model() + " (inputs: " +
                             InputNames(config) + ")");
    }
  }
  return Status::Ok();
}

Status ValidateRequestedOutputs(const inference::ModelConfig& config, const InferenceRequest& request) {
  const auto& outputs = request.requested_outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RequestedOutput& out = outputs[i];
    const inference::ModelOutput* found = FindOutput(config, out.name);
    if (found == nullptr) {
      const char* state = IsStateOutput(config, out.name)
                              ? ": it is an implicit state output, which the server keeps (list it in the "
                                "config's output to have it returned)"
                              : "";
      return InvalidArgument("unexpected requested output '" + out.name + "' for " + ModelLabel(config) + state +
                             " (outputs: " + OutputNames(config) + ")");
    }
    if (NamedAmong(outputs, i, out.name)) {
      // Triton's words first (core infer_request.cc), which its L0_http and L0_grpc tests match.
      return InvalidArgument("output '" + out.name + "' already exists in request (requested more than once for " +
                             ModelLabel(config) + ")");
    }
    if (out.classification > 0) {
      ORTSERVE_RETURN_IF_ERROR(CheckClassifiable("output '" + out.name + "' of " + ModelLabel(config),
                                                 FromConfigDataType(found->data_type())));
    }
  }
  return Status::Ok();
}

// Triton ignores the priority of a model without priority levels.
Status ValidatePriority(const inference::ModelConfig& config, const InferenceRequest& request) {
  const uint64_t levels = config.dynamic_batching().priority_levels();
  if (levels == 0 || request.priority <= levels) return Status::Ok();
  return InvalidArgument("request '" + request.id + "' priority " + std::to_string(request.priority) +
                         " exceeds " + ModelLabel(config) + " priority_levels " + std::to_string(levels));
}

}  // namespace

Status ValidateRequest(const inference::ModelConfig& config, const InferenceRequest& request) {
  // Runs for every request, so nothing is allocated unless it fails: the
  // label and the expected shape are built for the error message only, and
  // repeats are found by scanning what came before (NamedAmong).
  ORTSERVE_RETURN_IF_ERROR(ValidateInputs(config, request));
  ORTSERVE_RETURN_IF_ERROR(ValidateRequestedOutputs(config, request));
  return ValidatePriority(config, request);
}

Status ApplyInputReshape(const inference::ModelConfig& config, InferenceRequest* request) {
  for (Tensor& t : request->inputs) {
    const inference::ModelInput* in = FindInput(config, t.name);
    if (in != nullptr && in->has_reshape()) {
      ORTSERVE_RETURN_IF_ERROR(Reshape(*in, config.max_batch_size() > 0, &t));
    }
  }
  return Status::Ok();
}

}  // namespace ortserve
