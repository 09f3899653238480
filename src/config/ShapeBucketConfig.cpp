#include "config/ShapeBucketConfig.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include "config/ConfigTypes.h"
#include "core/Text.h"

namespace ortserve {
namespace {

using Parameters = google::protobuf::Map<std::string, inference::ModelParameter>;


// "a, b,c" -> {"a", "b", "c"}; an empty item is an error of `key`.
Result<std::vector<std::string>> SplitList(const char* key, const std::string& text) {
  std::vector<std::string> items;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = TrimBlanks(rest.substr(0, comma));
    if (item.empty()) {
      return InvalidArgument("parameter '" + std::string(key) + "' value '" + text +
                             "': expected a comma-separated list without empty items");
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) return items;
    rest.remove_prefix(comma + 1);
  }
}


const std::string* FindParameter(const Parameters& parameters, const char* key) {
  auto it = parameters.find(key);
  return it == parameters.end() ? nullptr : &it->second.string_value();
}

template <typename T>
std::vector<std::byte> BytesOf(T value) {
  std::vector<std::byte> bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

template <typename T>
std::optional<std::vector<std::byte>> IntegerPad(std::string_view text) {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  auto v = ParseNumber<Wide>(text);
  if (!v || *v < static_cast<Wide>(std::numeric_limits<T>::min()) ||
      *v > static_cast<Wide>(std::numeric_limits<T>::max())) {
    return std::nullopt;
  }
  return BytesOf(static_cast<T>(*v));
}

// One element of `dtype` holding `text`; nullopt when it cannot (FP16 and
// BF16 take only 0, which needs no conversion).
std::optional<std::vector<std::byte>> PadElement(DataType dtype, std::string_view text) {
  text = TrimBlanks(text);
  switch (dtype) {
    case DataType::kBool:
      if (text == "0" || text == "false") return BytesOf(uint8_t{0});
      if (text == "1" || text == "true") return BytesOf(uint8_t{1});
      return std::nullopt;
    case DataType::kUint8: return IntegerPad<uint8_t>(text);
    case DataType::kUint16: return IntegerPad<uint16_t>(text);
    case DataType::kUint32: return IntegerPad<uint32_t>(text);
    case DataType::kUint64: return IntegerPad<uint64_t>(text);
    case DataType::kInt8: return IntegerPad<int8_t>(text);
    case DataType::kInt16: return IntegerPad<int16_t>(text);
    case DataType::kInt32: return IntegerPad<int32_t>(text);
    case DataType::kInt64: return IntegerPad<int64_t>(text);
    case DataType::kFp32: {
      auto v = ParseNumber<double>(text);
      if (!v) return std::nullopt;
      return BytesOf(static_cast<float>(*v));
    }
    case DataType::kFp64: {
      auto v = ParseNumber<double>(text);
      if (!v) return std::nullopt;
      return BytesOf(*v);
    }
    case DataType::kFp16:
    case DataType::kBf16: {
      auto v = ParseNumber<double>(text);
      if (!v || *v != 0.0) return std::nullopt;
      return std::vector<std::byte>(2);
    }
    default:
      return std::nullopt;
  }
}

// The checks every bucketed tensor (input or output) shares: in the config,
// no reshape, a variable bucketed dim, fixed-size data.
template <typename ConfigTensor>
Status CheckBucketedTensor(const char* key, const char* kind, const ConfigTensor* tensor, const std::string& name,
                           int dim) {
  const std::string where = "parameter '" + std::string(key) + "': " + kind + " '" + name + "'";
  if (tensor == nullptr) return InvalidArgument(where + " is not in the config");
  if (tensor->has_reshape()) return InvalidArgument(where + " has a reshape, which shape buckets do not support");
  if (FromConfigDataType(tensor->data_type()) == DataType::kBytes) {
    return InvalidArgument(where + " is BYTES; only fixed-size data types can be padded or cropped");
  }
  if (tensor->dims_size() <= dim || tensor->dims(dim) != -1) {
    return InvalidArgument(where + " has dims " + ShapeToString(ConfigDims(tensor->dims())) + ": its dim " +
                           std::to_string(dim) + " (" + kBucketDimParameter + ") must be variable (-1)");
  }
  return Status::Ok();
}

const inference::ModelInput* ConfigInput(const inference::ModelConfig& config, const std::string& name) {
  for (const auto& in : config.input()) {
    if (in.name() == name) return &in;
  }
  return nullptr;
}

const inference::ModelOutput* ConfigOutput(const inference::ModelConfig& config, const std::string& name) {
  for (const auto& out : config.output()) {
    if (out.name() == name) return &out;
  }
  return nullptr;
}

Result<std::vector<int64_t>> ParseSizes(const std::string& text) {
  auto items = SplitList(kShapeBucketsParameter, text);
  if (!items.ok()) return items.status();
  std::vector<int64_t> sizes;
  for (const std::string& item : items.value()) {
    auto size = ParseNumber<int64_t>(item);
    if (!size || *size < 1 || (!sizes.empty() && *size <= sizes.back())) {
      return InvalidArgument("parameter '" + std::string(kShapeBucketsParameter) + "' value '" + text +
                             "': bucket '" + item + "' is not a positive integer above the one before it " +
                             "(expected ascending lengths, e.g. \"16,32,64,128\")");
    }
    sizes.push_back(*size);
  }
  return sizes;
}

Result<int> ParseDim(const Parameters& parameters) {
  const std::string* text = FindParameter(parameters, kBucketDimParameter);
  if (text == nullptr) return 0;
  auto dim = ParseNumber<int>(*text);
  if (!dim || *dim < 0) {
    return InvalidArgument("parameter '" + std::string(kBucketDimParameter) + "' value '" + *text +
                           "': expected a dim index >= 0, counted in the config's dims (after the batch dim)");
  }
  return *dim;
}

Result<ShapeBucketConfig::Overflow> ParseOverflow(const Parameters& parameters) {
  const std::string* text = FindParameter(parameters, kBucketOverflowParameter);
  if (text == nullptr || *text == "alone") return ShapeBucketConfig::Overflow::kAlone;
  if (*text == "reject") return ShapeBucketConfig::Overflow::kReject;
  return InvalidArgument("parameter '" + std::string(kBucketOverflowParameter) + "' value '" + *text +
                         "': expected \"alone\" or \"reject\"");
}

// bucket_pad's "name:value" items, then bucket_mask's input (padded with 0).
Result<std::vector<ShapeBucketConfig::PaddedInput>> ParsePaddedInputs(const inference::ModelConfig& config, int dim) {
  std::vector<ShapeBucketConfig::PaddedInput> inputs;
  const auto listed = [&inputs](const std::string& name) {
    return std::any_of(inputs.begin(), inputs.end(), [&name](const auto& p) { return p.name == name; });
  };
  if (const std::string* text = FindParameter(config.parameters(), kBucketPadParameter)) {
    auto items = SplitList(kBucketPadParameter, *text);
    if (!items.ok()) return items.status();
    for (const std::string& item : items.value()) {
      const std::string where = "parameter '" + std::string(kBucketPadParameter) + "' item '" + item + "'";
      const size_t colon = item.rfind(':');
      if (colon == std::string::npos) return InvalidArgument(where + ": expected \"<input>:<pad value>\"");
      ShapeBucketConfig::PaddedInput p;
      p.name = std::string(TrimBlanks(std::string_view(item).substr(0, colon)));
      if (listed(p.name)) return InvalidArgument(where + ": input '" + p.name + "' is listed twice");
      const inference::ModelInput* in = ConfigInput(config, p.name);
      ORTSERVE_RETURN_IF_ERROR(CheckBucketedTensor(kBucketPadParameter, "input", in, p.name, dim));
      p.dtype = FromConfigDataType(in->data_type());
      auto pad = PadElement(p.dtype, std::string_view(item).substr(colon + 1));
      if (!pad) {
        return InvalidArgument(where + ": the pad value is not a " + std::string(DataTypeName(p.dtype)) +
                               (p.dtype == DataType::kFp16 || p.dtype == DataType::kBf16 ? " (only 0 for it)" : ""));
      }
      p.pad = std::move(pad).value();
      inputs.push_back(std::move(p));
    }
  }
  if (const std::string* mask = FindParameter(config.parameters(), kBucketMaskParameter)) {
    if (listed(*mask)) {
      return InvalidArgument("parameter '" + std::string(kBucketMaskParameter) + "': input '" + *mask +
                             "' is also in '" + kBucketPadParameter + "'; the mask is always padded with 0");
    }
    const inference::ModelInput* in = ConfigInput(config, *mask);
    ORTSERVE_RETURN_IF_ERROR(CheckBucketedTensor(kBucketMaskParameter, "input", in, *mask, dim));
    ShapeBucketConfig::PaddedInput p{*mask, FromConfigDataType(in->data_type()), {}};
    p.pad.resize(DataTypeSize(p.dtype));
    inputs.push_back(std::move(p));
  }
  if (inputs.empty()) {
    return InvalidArgument("parameter '" + std::string(kShapeBucketsParameter) + "' needs the inputs to pad: '" +
                           kBucketPadParameter + "' and/or '" + kBucketMaskParameter + "'");
  }
  return inputs;
}

Result<std::vector<std::string>> ParseCroppedOutputs(const inference::ModelConfig& config, int dim) {
  std::vector<std::string> outputs;
  const std::string* text = FindParameter(config.parameters(), kBucketOutputsParameter);
  if (text == nullptr) return outputs;
  auto items = SplitList(kBucketOutputsParameter, *text);
  if (!items.ok()) return items.status();
  for (const std::string& name : items.value()) {
    if (std::find(outputs.begin(), outputs.end(), name) != outputs.end()) {
      return InvalidArgument("parameter '" + std::string(kBucketOutputsParameter) + "': output '" + name +
                             "' is listed twice");
    }
    ORTSERVE_RETURN_IF_ERROR(
        CheckBucketedTensor(kBucketOutputsParameter, "output", ConfigOutput(config, name), name, dim));
    outputs.push_back(name);
  }
  return outputs;
}

}  // namespace

bool IsShapeBucketParameter(const std::string& key) {
  for (const char* known : {kShapeBucketsParameter, kBucketDimParameter, kBucketPadParameter, kBucketMaskParameter,
                            kBucketOutputsParameter, kBucketOverflowParameter}) {
    if (key == known) return true;
  }
  return false;
}

Result<std::optional<ShapeBucketConfig>> ShapeBucketConfig::FromConfig(const inference::ModelConfig& config) {
  const Parameters& parameters = config.parameters();
  const std::string* sizes_text = FindParameter(parameters, kShapeBucketsParameter);
  if (sizes_text == nullptr) {
    for (const auto& [key, value] : parameters) {
      if (IsShapeBucketParameter(key)) {
        return InvalidArgument("parameter '" + key + "' needs parameter '" + kShapeBucketsParameter + "'");
      }
    }
    return std::optional<ShapeBucketConfig>();
  }
  if (config.max_batch_size() <= 0) {
    return InvalidArgument("parameter '" + std::string(kShapeBucketsParameter) +
                           "' needs max_batch_size > 0: buckets exist to batch requests of different lengths");
  }
  if (config.has_sequence_batching()) {
    return InvalidArgument("parameter '" + std::string(kShapeBucketsParameter) +
                           "' is not supported with sequence_batching");
  }
  ShapeBucketConfig buckets;
  buckets.model = config.name();
  auto sizes = ParseSizes(*sizes_text);
  if (!sizes.ok()) return sizes.status();
  buckets.sizes = std::move(sizes).value();
  auto dim = ParseDim(parameters);
  if (!dim.ok()) return dim.status();
  buckets.axis = static_cast<size_t>(dim.value()) + 1;
  auto inputs = ParsePaddedInputs(config, dim.value());
  if (!inputs.ok()) return inputs.status();
  buckets.inputs = std::move(inputs).value();
  auto outputs = ParseCroppedOutputs(config, dim.value());
  if (!outputs.ok()) return outputs.status();
  buckets.outputs = std::move(outputs).value();
  auto overflow = ParseOverflow(parameters);
  if (!overflow.ok()) return overflow.status();
  buckets.overflow = overflow.value();
  return std::optional<ShapeBucketConfig>(std::move(buckets));
}

std::optional<int64_t> ShapeBucketConfig::BucketFor(int64_t length) const {
  auto it = std::lower_bound(sizes.begin(), sizes.end(), length);
  if (it == sizes.end()) return std::nullopt;
  return *it;
}

const ShapeBucketConfig::PaddedInput* ShapeBucketConfig::FindPadded(const std::string& name) const {
  for (const PaddedInput& p : inputs) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool ShapeBucketConfig::IsCropped(const std::string& name) const {
  return std::find(outputs.begin(), outputs.end(), name) != outputs.end();
}

}  // namespace ortserve
