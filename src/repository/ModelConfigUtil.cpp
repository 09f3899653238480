#include "repository/ModelConfigUtil.h"

#include "repository/GpuConfig.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <set>

namespace ortserve {
namespace {

namespace pb = google::protobuf;

// Keeps the first syntax error with its 1-based position.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!has_error_) {
      has_error_ = true;
      line_ = line + 1;
      column_ = column + 1;
      message_ = message;
    }
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  std::string Describe(const std::string& label) const {
    return label + ":" + std::to_string(line_) + ":" + std::to_string(column_) + ": " + message_;
  }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// Fields ortserve acts on; everything else that is set is reported as ignored.
// "Leaf" entries are supported as a whole; "container" entries are descended
// into so that unsupported sub-fields are named precisely.
const std::set<std::string>& SupportedLeaves() {
  static const std::set<std::string> kLeaves = {
      "name", "platform", "backend", "version_policy", "max_batch_size",
      "default_model_filename", "parameters", "model_warmup",
      // Handled by CheckPlatform (fails the load), not ignored.
      "sequence_batching", "ensemble_scheduling",
      "input.name", "input.data_type", "input.dims", "input.reshape", "input.optional",
      // Informational in Triton too (layout hint for clients).
      "input.format",
      "output.name", "output.data_type", "output.dims", "output.reshape",
      "instance_group.name", "instance_group.kind", "instance_group.count",
      "instance_group.gpus",
      "optimization.graph", "optimization.execution_accelerators",
      "dynamic_batching.preferred_batch_size", "dynamic_batching.max_queue_delay_microseconds",
      "dynamic_batching.priority_levels", "dynamic_batching.default_priority_level",
      "dynamic_batching.default_queue_policy", "dynamic_batching.priority_queue_policy",
  };
  return kLeaves;
}

const std::set<std::string>& SupportedContainers() {
  static const std::set<std::string> kContainers = {
      "input", "output", "instance_group", "optimization", "dynamic_batching",
      "model_transaction_policy"};
  return kContainers;
}

void CollectIgnored(const pb::Message& message, const std::string& prefix,
                    std::vector<std::string>* out) {
  const pb::Reflection* reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const std::string path = prefix.empty() ? field->name() : prefix + "." + field->name();
    if (SupportedLeaves().count(path)) continue;
    if (SupportedContainers().count(path) &&
        field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        const int n = reflection->FieldSize(message, field);
        for (int i = 0; i < n; ++i) {
          CollectIgnored(reflection->GetRepeatedMessage(message, field, i), path, out);
        }
      } else {
        CollectIgnored(reflection->GetMessage(message, field), path, out);
      }
      continue;
    }
    if (std::find(out->begin(), out->end(), path) == out->end()) out->push_back(path);
  }
}

std::string JoinNames(const std::vector<TensorSignature>& tensors) {
  std::string s;
  for (const auto& t : tensors) {
    if (!s.empty()) s += ", ";
    s += t.name;
  }
  return s;
}

const TensorSignature* FindTensor(const std::vector<TensorSignature>& tensors,
                                  const std::string& name) {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool HasDynamicFirstDim(const TensorSignature& t) { return !t.shape.empty() && t.shape[0] < 0; }

// Fills name/type/dims of one config tensor (input or output) from the model.
template <typename ConfigTensor>
void FillTensor(const TensorSignature& sig, bool batching, ConfigTensor* tensor) {
  if (tensor->name().empty()) tensor->set_name(sig.name);
  if (tensor->data_type() == inference::TYPE_INVALID) {
    tensor->set_data_type(ToConfigDataType(sig.dtype));
  }
  if (tensor->dims_size() == 0 && !tensor->has_reshape()) {
    Shape dims = sig.shape;
    if (batching && !dims.empty()) dims.erase(dims.begin());
    if (batching && dims.empty()) {
      // Triton's representation of a [batch]-shaped tensor: dims [1], reshape [].
      tensor->add_dims(1);
      tensor->mutable_reshape();
      return;
    }
    for (int64_t d : dims) tensor->add_dims(d < 0 ? -1 : d);
  }
}

template <typename ConfigTensor>
Status CheckTensor(const char* kind, const ConfigTensor& tensor, const TensorSignature* sig,
                   const std::vector<TensorSignature>& all, int max_batch_size) {
  if (sig == nullptr) {
    return Unavailable(std::string(kind) + " '" + tensor.name() +
                       "' in the config is not an " + kind + " of the model (model " + kind +
                       "s: " + JoinNames(all) + ")");
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
  if (tensor.has_reshape()) {
    // Reshape dims: positive, or one -1, with a product that fits 64 bits
    // (a wrapped product would let a nonsensical reshape pass the count check).
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
        return Unavailable(std::string(kind) + " '" + tensor.name() + "': invalid reshape " +
                           ShapeToString(expected) +
                           " (each dim must be positive or -1, with a product that fits 64 bits)");
      }
      product = *next;
    }
    if (wildcards > 1) {
      return Unavailable(std::string(kind) + " '" + tensor.name() + "': reshape " +
                         ShapeToString(expected) + " has more than one -1");
    }
    auto dims_count = ElementCount(dims);
    auto reshape_count = ElementCount(expected);
    if (dims_count && reshape_count && *dims_count != *reshape_count) {
      return Unavailable(std::string(kind) + " '" + tensor.name() + "': reshape " +
                         ShapeToString(expected) + " has a different element count than dims " +
                         ShapeToString(dims));
    }
  }
  const bool unknown_output_rank = std::string(kind) == "output" && sig->shape.empty();
  if (max_batch_size > 0) {
    if (!HasDynamicFirstDim(*sig) && !unknown_output_rank) {
      return Unavailable(std::string(kind) + " '" + tensor.name() + "': max_batch_size is " +
                         std::to_string(max_batch_size) +
                         " but the model's first dim is not dynamic (model shape " +
                         ShapeToString(sig->shape) + "); set max_batch_size: 0");
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
    return Unavailable(std::string(kind) + " '" + tensor.name() + "': config shape " +
                       ShapeToString(expected) + (max_batch_size > 0 ? " (with batch dim)" : "") +
                       " does not match the model shape " + ShapeToString(sig->shape));
  }
  return Status::Ok();
}

}  // namespace

Shape ConfigDims(const google::protobuf::RepeatedField<int64_t>& dims) {
  return Shape(dims.begin(), dims.end());
}

Result<inference::ModelConfig> ParseModelConfig(const std::string& text, const std::string& label) {
  inference::ModelConfig config;
  FirstErrorCollector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    if (errors.has_error()) return InvalidArgument(errors.Describe(label));
    return InvalidArgument(label + ": cannot be parsed");
  }
  return config;
}

std::vector<std::string> IgnoredConfigFields(const inference::ModelConfig& config) {
  std::vector<std::string> out;
  CollectIgnored(config, "", &out);
  return out;
}

bool IsKnownParameter(const std::string& key) {
  static const std::set<std::string> kKnown = {
      "intra_op_thread_count", "inter_op_thread_count", "execution_mode",
      "enable_mem_arena",      "enable_mem_pattern",    "allow_spinning",
      kFallbackModelParameter, kBatchWindowParameter};
  return kKnown.count(key) > 0 || IsGpuParameter(key);
}

std::string FallbackModelName(const inference::ModelConfig& config) {
  auto it = config.parameters().find(kFallbackModelParameter);
  return it == config.parameters().end() ? std::string() : it->second.string_value();
}

namespace {

template <typename Io>
Status CompareIo(const char* kind, const google::protobuf::RepeatedPtrField<Io>& primary,
                 const google::protobuf::RepeatedPtrField<Io>& fallback) {
  auto dims_text = [](const Io& io) {
    std::string s = "[";
    for (int i = 0; i < io.dims_size(); ++i) s += (i ? ", " : "") + std::to_string(io.dims(i));
    return s + "]";
  };
  if (primary.size() != fallback.size()) {
    return InvalidArgument(std::string("it has ") + std::to_string(fallback.size()) + " " + kind +
                           "s, the primary " + std::to_string(primary.size()));
  }
  for (const Io& p : primary) {
    const Io* match = nullptr;
    for (const Io& f : fallback)
      if (f.name() == p.name()) match = &f;
    if (!match) return InvalidArgument(std::string("it has no ") + kind + " '" + p.name() + "'");
    if (match->data_type() != p.data_type()) {
      return InvalidArgument(std::string(kind) + " '" + p.name() + "' is " +
                             inference::DataType_Name(match->data_type()) + ", the primary's " +
                             inference::DataType_Name(p.data_type()));
    }
    if (dims_text(*match) != dims_text(p)) {
      return InvalidArgument(std::string(kind) + " '" + p.name() + "' has dims " + dims_text(*match) +
                             ", the primary's " + dims_text(p));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckFallbackCompatible(const inference::ModelConfig& primary,
                               const inference::ModelConfig& fallback) {
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

DataType FromConfigDataType(inference::DataType type) {
  switch (type) {
    case inference::TYPE_BOOL: return DataType::kBool;
    case inference::TYPE_UINT8: return DataType::kUint8;
    case inference::TYPE_UINT16: return DataType::kUint16;
    case inference::TYPE_UINT32: return DataType::kUint32;
    case inference::TYPE_UINT64: return DataType::kUint64;
    case inference::TYPE_INT8: return DataType::kInt8;
    case inference::TYPE_INT16: return DataType::kInt16;
    case inference::TYPE_INT32: return DataType::kInt32;
    case inference::TYPE_INT64: return DataType::kInt64;
    case inference::TYPE_FP16: return DataType::kFp16;
    case inference::TYPE_FP32: return DataType::kFp32;
    case inference::TYPE_FP64: return DataType::kFp64;
    case inference::TYPE_STRING: return DataType::kBytes;
    case inference::TYPE_BF16: return DataType::kBf16;
    default: return DataType::kInvalid;
  }
}

inference::DataType ToConfigDataType(DataType type) {
  switch (type) {
    case DataType::kBool: return inference::TYPE_BOOL;
    case DataType::kUint8: return inference::TYPE_UINT8;
    case DataType::kUint16: return inference::TYPE_UINT16;
    case DataType::kUint32: return inference::TYPE_UINT32;
    case DataType::kUint64: return inference::TYPE_UINT64;
    case DataType::kInt8: return inference::TYPE_INT8;
    case DataType::kInt16: return inference::TYPE_INT16;
    case DataType::kInt32: return inference::TYPE_INT32;
    case DataType::kInt64: return inference::TYPE_INT64;
    case DataType::kFp16: return inference::TYPE_FP16;
    case DataType::kFp32: return inference::TYPE_FP32;
    case DataType::kFp64: return inference::TYPE_FP64;
    case DataType::kBytes: return inference::TYPE_STRING;
    case DataType::kBf16: return inference::TYPE_BF16;
    case DataType::kInvalid: break;
  }
  return inference::TYPE_INVALID;
}

Status CheckPlatform(inference::ModelConfig* config) {
  const std::string& platform = config->platform();
  const std::string& backend = config->backend();
  if (!platform.empty() && platform != kOnnxPlatform) {
    return Unavailable("platform '" + platform + "' is not supported: ortserve serves only '" +
                       kOnnxPlatform + "' models");
  }
  if (!backend.empty() && backend != kOnnxBackend) {
    return Unavailable("backend '" + backend + "' is not supported: ortserve serves only the '" +
                       kOnnxBackend + "' backend");
  }
  if (config->has_ensemble_scheduling()) {
    return Unavailable("ensemble scheduling is not supported");
  }
  if (config->has_sequence_batching()) {
    return Unavailable("sequence batching is not supported yet");
  }
  config->set_platform(kOnnxPlatform);
  config->set_backend(kOnnxBackend);
  return Status::Ok();
}

void AutoCompleteConfig(const ModelSignature& signature, inference::ModelConfig* config) {
  if (config->input_size() == 0 && config->output_size() == 0 && config->max_batch_size() == 0) {
    bool batchable = !signature.inputs.empty() && !signature.outputs.empty();
    for (const auto& t : signature.inputs) batchable = batchable && HasDynamicFirstDim(t);
    for (const auto& t : signature.outputs) batchable = batchable && HasDynamicFirstDim(t);
    if (batchable) {
      config->set_max_batch_size(kDefaultMaxBatchSize);
      if (!config->has_sequence_batching() && !config->has_dynamic_batching()) {
        config->mutable_dynamic_batching();
      }
    }
  }
  const bool batching = config->max_batch_size() > 0;
  if (config->input_size() == 0) {
    for (const auto& t : signature.inputs) FillTensor(t, batching, config->add_input());
  } else {
    for (auto& input : *config->mutable_input()) {
      if (const auto* sig = FindTensor(signature.inputs, input.name())) FillTensor(*sig, batching, &input);
    }
  }
  if (config->output_size() == 0) {
    for (const auto& t : signature.outputs) FillTensor(t, batching, config->add_output());
  } else {
    for (auto& output : *config->mutable_output()) {
      if (const auto* sig = FindTensor(signature.outputs, output.name())) FillTensor(*sig, batching, &output);
    }
  }
  if (config->instance_group_size() == 0) {
    auto* group = config->add_instance_group();
    group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
    group->set_count(1);
  }
  for (int i = 0; i < config->instance_group_size(); ++i) {
    auto* group = config->mutable_instance_group(i);
    if (group->name().empty()) group->set_name(config->name() + "_" + std::to_string(i));
    if (group->count() == 0) group->set_count(1);
  }
}

Status ValidateConfigAgainstSignature(const inference::ModelConfig& config,
                                      const ModelSignature& signature) {
  if (config.max_batch_size() < 0) {
    return Unavailable("max_batch_size must be >= 0, got " + std::to_string(config.max_batch_size()));
  }
  std::set<std::string> seen;
  for (const auto& input : config.input()) {
    if (!seen.insert(input.name()).second) {
      return Unavailable("input '" + input.name() + "' appears twice in the config");
    }
    ORTSERVE_RETURN_IF_ERROR(CheckTensor("input", input, FindTensor(signature.inputs, input.name()),
                                         signature.inputs, config.max_batch_size()));
  }
  for (const auto& t : signature.inputs) {
    if (!seen.count(t.name)) {
      return Unavailable("model input '" + t.name + "' is missing from the config");
    }
  }
  seen.clear();
  for (const auto& output : config.output()) {
    if (!seen.insert(output.name()).second) {
      return Unavailable("output '" + output.name() + "' appears twice in the config");
    }
    ORTSERVE_RETURN_IF_ERROR(CheckTensor("output", output,
                                         FindTensor(signature.outputs, output.name()),
                                         signature.outputs, config.max_batch_size()));
  }
  if (config.output_size() == 0) return Unavailable("the config lists no outputs");
  return Status::Ok();
}

Result<Shape> ReshapeDims(const Shape& from, const Shape& to_dims) {
  auto count = ElementCount(from);
  if (!count) return InvalidArgument("invalid shape " + ShapeToString(from));
  Shape out = to_dims;
  int unknown = -1;
  uint64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0) {
      if (unknown >= 0) {
        return InvalidArgument("cannot reshape " + ShapeToString(from) + " to " +
                               ShapeToString(to_dims) + ": more than one -1");
      }
      unknown = static_cast<int>(i);
    } else if (const std::optional<uint64_t> product =
                   CheckedMultiply(known, static_cast<uint64_t>(out[i]))) {
      known = *product;
    } else {
      return InvalidArgument("cannot reshape " + ShapeToString(from) + " to " +
                             ShapeToString(to_dims) + ": element count overflows 64 bits");
    }
  }
  if (unknown >= 0) {
    if (known == 0 || *count % known != 0) {
      return InvalidArgument("cannot reshape " + ShapeToString(from) + " to " + ShapeToString(to_dims));
    }
    out[static_cast<size_t>(unknown)] = static_cast<int64_t>(*count / known);
  } else if (known != *count) {
    return InvalidArgument("cannot reshape " + ShapeToString(from) + " to " + ShapeToString(to_dims));
  }
  return out;
}

}  // namespace ortserve
