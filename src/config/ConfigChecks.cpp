#include "config/ConfigChecks.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/ConfigTypes.h"
#include "config/EnsembleGraph.h"
#include "config/RaggedConfig.h"
#include "config/SequenceConfig.h"

namespace ortserve {
namespace {

// The names sorted, as Triton lists them.
std::string JoinNames(const std::vector<TensorSignature>& tensors) {
  std::set<std::string> names;
  for (const auto& t : tensors) names.insert(t.name);
  std::string s;
  for (const auto& name : names) {
    if (!s.empty()) s += ", ";
    s += name;
  }
  return s;
}

// Triton's "model 'm', tensor 't': " prefix of its ONNX Runtime backend.
std::string TensorPrefix(const inference::ModelConfig& config, const std::string& tensor) {
  return "model '" + config.name() + "', tensor '" + tensor + "': ";
}

// The reshape's dims: positive, or one -1, with a product that fits 64 bits
// (a wrapped product would let a nonsensical reshape pass the count check),
// and the element count of `dims`.
Status CheckReshape(const char* kind, const std::string& tensor_name, const Shape& dims, const Shape& expected) {
  int wildcards = 0;
  uint64_t product = 1;
  for (int64_t d : expected) {
    if (d == -1) {
      ++wildcards;
      continue;
    }
    const std::optional<uint64_t> next =
        d > 0 ? CheckedMultiply(product, static_cast<uint64_t>(d)) : std::nullopt;
    if (!next) {
      return Unavailable(std::string(kind) + " '" + tensor_name + "': invalid reshape " +
                         ShapeToString(expected) +
                         " (each dim must be positive or -1, with a product that fits 64 bits)");
    }
    product = *next;
  }
  if (wildcards > 1) {
    return Unavailable(std::string(kind) + " '" + tensor_name + "': reshape " +
                       ShapeToString(expected) + " has more than one -1");
  }
  auto dims_count = ElementCount(dims);
  auto reshape_count = ElementCount(expected);
  if (dims_count && reshape_count && *dims_count != *reshape_count) {
    return Unavailable(std::string(kind) + " '" + tensor_name + "': reshape " +
                       ShapeToString(expected) + " has a different element count than dims " +
                       ShapeToString(dims));
  }
  return Status::Ok();
}

template <typename ConfigTensor>
Status CheckTensor(const char* kind, const ConfigTensor& tensor, const TensorSignature* sig,
                   const std::vector<TensorSignature>& all, const inference::ModelConfig& config) {
  const int max_batch_size = config.max_batch_size();
  if (sig == nullptr) {
    return Unavailable(std::string("unexpected inference ") + kind + " '" + tensor.name() + "', allowed " + kind +
                       "s are: " + JoinNames(all) + " (the config's " + kind + " '" + tensor.name() +
                       "' is not in the model)");
  }
  const DataType config_type = FromConfigDataType(tensor.data_type());
  if (config_type != sig->dtype) {
    return Unavailable(std::string(kind) + " '" + tensor.name() + "': config data_type " +
                       inference::DataType_Name(tensor.data_type()) + " but the model has " +
                       std::string(DataTypeConfigName(sig->dtype)));
  }
  const Shape dims = ConfigDims(tensor.dims());
  for (int64_t d : dims) {
    if (d < -1 || d == 0) {
      return Unavailable(std::string(kind) + " '" + tensor.name() + "': invalid dims " +
                         ShapeToString(dims) + " (each dim must be positive or -1)");
    }
  }
  Shape expected = tensor.has_reshape() ? ConfigDims(tensor.reshape().shape()) : dims;
  if (tensor.has_reshape()) ORTSERVE_RETURN_IF_ERROR(CheckReshape(kind, tensor.name(), dims, expected));
  const bool unknown_output_rank = std::string(kind) == "output" && sig->shape.empty();
  if (max_batch_size > 0) {
    if (!HasDynamicFirstDim(*sig) && !unknown_output_rank) {
      return Unavailable(TensorPrefix(config, tensor.name()) +
                         "for the model to support batching the shape should have at least 1 dimension and the "
                         "first dimension must be -1; but shape expected by the model is " +
                         ShapeToString(sig->shape) + " (max_batch_size is " + std::to_string(max_batch_size) +
                         " but the model's first dim is not dynamic; set max_batch_size: 0)");
    }
    expected.insert(expected.begin(), -1);
  }
  // ORT reports rank 0 for an output whose shape it cannot infer; trust the
  // config's dims then (a real scalar output under a config with dims would
  // fail at run time when the scheduler slices it).
  if (unknown_output_rank && !dims.empty()) {
    return Status::Ok();
  }
  bool match = expected.size() == sig->shape.size();
  for (size_t i = 0; match && i < expected.size(); ++i) {
    match = expected[i] == -1 || sig->shape[i] < 0 || expected[i] == sig->shape[i];
  }
  if (!match) {
    const std::string count = std::to_string(expected.size()) + " dimensions ";
    return Unavailable(
        TensorPrefix(config, tensor.name()) + "the model expects " + std::to_string(sig->shape.size()) +
        " dimensions (shape " + ShapeToString(sig->shape) + ") but the model configuration specifies " + count +
        (max_batch_size > 0 ? "(an initial batch dimension because max_batch_size > 0 followed by the explicit "
                              "tensor shape, making complete shape " + ShapeToString(expected) + ")"
                            : "(shape " + ShapeToString(expected) + ")") +
        " (" + kind + " '" + tensor.name() + "': config shape does not match the model shape)");
  }
  return Status::Ok();
}

template <typename Io>
Status CompareIo(const char* kind, const google::protobuf::RepeatedPtrField<Io>& primary,
                 const google::protobuf::RepeatedPtrField<Io>& fallback, const std::string& own = "the primary") {
  auto dims_text = [](const Io& io) {
    std::string s = "[";
    for (int i = 0; i < io.dims_size(); ++i) s += (i ? ", " : "") + std::to_string(io.dims(i));
    return s + "]";
  };
  if (primary.size() != fallback.size()) {
    return InvalidArgument(std::string("it has ") + std::to_string(fallback.size()) + " " + kind +
                           "s, " + own + " " + std::to_string(primary.size()));
  }
  for (const Io& p : primary) {
    const Io* match = nullptr;
    for (const Io& f : fallback)
      if (f.name() == p.name()) match = &f;
    if (!match) return InvalidArgument(std::string("it has no ") + kind + " '" + p.name() + "'");
    if (match->data_type() != p.data_type()) {
      return InvalidArgument(std::string(kind) + " '" + p.name() + "' is " +
                             inference::DataType_Name(match->data_type()) + ", " + own + "'s " +
                             inference::DataType_Name(p.data_type()));
    }
    if (dims_text(*match) != dims_text(p)) {
      return InvalidArgument(std::string(kind) + " '" + p.name() + "' has dims " + dims_text(*match) +
                             ", " + own + "'s " + dims_text(p));
    }
  }
  return Status::Ok();
}

// Triton's count check: the config's inputs plus those the server feeds
// (sequence controls and states) against the model's.
Status CheckInputCount(const inference::ModelConfig& config, const ModelSignature& signature) {
  size_t expected = static_cast<size_t>(config.input_size());
  std::string missing;
  for (const auto& t : signature.inputs) {
    const bool listed = std::any_of(config.input().begin(), config.input().end(),
                                    [&](const auto& input) { return input.name() == t.name; });
    if (!listed && IsServerFedInput(config, t.name)) ++expected;
    if (!listed && !IsServerFedInput(config, t.name) && missing.empty()) missing = t.name;
  }
  if (expected == signature.inputs.size()) return Status::Ok();
  return Unavailable("unable to load model '" + config.name() + "', configuration expects " +
                     std::to_string(expected) + " inputs, model provides " + std::to_string(signature.inputs.size()) +
                     (missing.empty() ? std::string(" (model inputs: " + JoinNames(signature.inputs) + ")")
                                      : " (model input '" + missing + "' is missing from the config)"));
}

}  // namespace

Status CheckPlatform(inference::ModelConfig* config) {
  // An ensemble has no model file and runs no session: its own checks.
  if (IsEnsemble(*config)) return CheckEnsembleScheduling(*config);
  const std::string& platform = config->platform();
  const std::string& backend = config->backend();
  if (!platform.empty() && platform != kOnnxPlatform) {
    // A platform Triton does not know either, with this backend: Triton's words.
    static const std::set<std::string> kTritonPlatforms = {"tensorrt_plan", "tensorflow_graphdef",
                                                           "tensorflow_savedmodel", "pytorch_libtorch"};
    if (!kTritonPlatforms.count(platform) && (backend.empty() || backend == kOnnxBackend)) {
      return Unavailable("unexpected 'platform' and 'backend' pair, got:" + platform + ", " + kOnnxBackend +
                         " (ortserve serves only '" + kOnnxPlatform + "' models)");
    }
    return Unavailable("platform '" + platform + "' is not supported: ortserve serves only '" +
                       kOnnxPlatform + "' models");
  }
  if (!backend.empty() && backend != kOnnxBackend) {
    return Unavailable("backend '" + backend + "' is not supported: ortserve serves only the '" +
                       kOnnxBackend + "' backend");
  }
  config->set_platform(kOnnxPlatform);
  config->set_backend(kOnnxBackend);
  return Status::Ok();
}

Status ValidateConfigAgainstSignature(const inference::ModelConfig& config,
                                      const ModelSignature& signature) {
  if (config.max_batch_size() < 0) {
    return Unavailable("max_batch_size must be >= 0, got " + std::to_string(config.max_batch_size()));
  }
  ORTSERVE_RETURN_IF_ERROR(CheckInputCount(config, signature));
  ORTSERVE_RETURN_IF_ERROR(CheckRaggedAgainstModel(config, signature));
  std::set<std::string> seen;
  for (const auto& input : config.input()) {
    if (!seen.insert(input.name()).second) {
      return Unavailable("input '" + input.name() + "' appears twice in the config");
    }
    // A ragged input reaches the model as one 1-D tensor (CheckRaggedAgainstModel).
    if (input.allow_ragged_batch() && FindTensor(signature.inputs, input.name())) continue;
    ORTSERVE_RETURN_IF_ERROR(
        CheckTensor("input", input, FindTensor(signature.inputs, input.name()), signature.inputs, config));
  }
  for (const auto& t : signature.inputs) {
    // Control and state inputs are the server's (CheckSequenceTensors).
    if (!seen.count(t.name) && !IsServerFedInput(config, t.name)) {
      return Unavailable("model input '" + t.name + "' is missing from the config");
    }
  }
  seen.clear();
  for (const auto& output : config.output()) {
    if (!seen.insert(output.name()).second) {
      return Unavailable("output '" + output.name() + "' appears twice in the config");
    }
    // A scattered output takes its source input's shape (CheckRaggedAgainstModel).
    if (IsBatchOutputTarget(config, output.name()) && FindTensor(signature.outputs, output.name())) continue;
    ORTSERVE_RETURN_IF_ERROR(
        CheckTensor("output", output, FindTensor(signature.outputs, output.name()), signature.outputs, config));
  }
  if (config.output_size() == 0) return Unavailable("the config lists no outputs");
  return CheckSequenceTensors(config, signature);
}

Status CheckFallbackCompatible(const inference::ModelConfig& primary,
                               const inference::ModelConfig& fallback) {
  if (primary.has_sequence_batching() || fallback.has_sequence_batching()) {
    return InvalidArgument(std::string(fallback.has_sequence_batching() ? "it" : "the primary") +
                           " has sequence_batching: a sequence's requests must all run where its state is, so a "
                           "sequence model neither has nor is a fallback");
  }
  if ((primary.max_batch_size() > 0) != (fallback.max_batch_size() > 0)) {
    return InvalidArgument(std::string("it ") + (fallback.max_batch_size() > 0 ? "batches" : "does not batch") +
                           " and the primary " + (primary.max_batch_size() > 0 ? "does" : "does not"));
  }
  if (fallback.max_batch_size() < primary.max_batch_size()) {
    return InvalidArgument("its max_batch_size " + std::to_string(fallback.max_batch_size()) +
                           " is below the primary's " + std::to_string(primary.max_batch_size()));
  }
  ORTSERVE_RETURN_IF_ERROR(CompareIo("input", primary.input(), fallback.input()));
  return CompareIo("output", primary.output(), fallback.output());
}

Status CheckReferenceCompatible(const inference::ModelConfig& model, const inference::ModelConfig& reference) {
  if ((model.max_batch_size() > 0) != (reference.max_batch_size() > 0)) {
    return InvalidArgument(std::string("it ") + (reference.max_batch_size() > 0 ? "batches" : "does not batch") +
                           " and this model " + (model.max_batch_size() > 0 ? "does" : "does not"));
  }
  ORTSERVE_RETURN_IF_ERROR(CompareIo("input", model.input(), reference.input(), "this model"));
  return CompareIo("output", model.output(), reference.output(), "this model");
}

}  // namespace ortserve
