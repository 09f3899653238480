#include "server/http/RawInferRequest.h"

#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "config/ConfigTypes.h"
#include "core/DataType.h"
#include "core/Tensor.h"

namespace ortserve::http {
namespace {

// "FP32 [-1,4]": how the config describes the input, for error messages.
std::string Describe(DataType dtype, const Shape& shape) {
  return std::string(DataTypeName(dtype)) + " " + ShapeToString(shape);
}

// The request shape of the raw input: the batch of 1, then the config's dims
// with the variable one (if any) deduced from the body's `byte_size`.
Result<Shape> DeduceShape(const std::string& model_name, const inference::ModelInput& input, DataType dtype,
                          bool batching, size_t byte_size) {
  Shape shape;
  if (batching) shape.push_back(1);
  std::optional<size_t> variable;
  uint64_t fixed_elements = 1;
  for (const int64_t dim : input.dims()) {
    if (dim < 0) {
      if (variable) {
        return InvalidArgument("The shape of the raw input '" + input.name() +
                               "' can not be deduced because there are more than one variable-sized dimension "
                               "(model '" + model_name + "')");
      }
      variable = shape.size();
    } else {
      auto product = CheckedMultiply(fixed_elements, static_cast<uint64_t>(dim));
      if (!product) return InvalidArgument("input '" + input.name() + "': its config dims overflow");
      fixed_elements = *product;
    }
    shape.push_back(dim);
  }
  if (dtype == DataType::kBytes) {
    if (variable || fixed_elements != 1) {
      return InvalidArgument("For BYTE datatype raw input '" + input.name() + "', the model must have input shape "
                             "[1] (model '" + model_name + "' has " + ShapeToString(shape) + ")");
    }
    return shape;
  }
  const auto row_bytes = CheckedMultiply(fixed_elements, DataTypeSize(dtype));
  if (!row_bytes) return InvalidArgument("input '" + input.name() + "': its config dims overflow");
  if (!variable) {
    if (byte_size != *row_bytes) {
      return InvalidArgument("raw request body of " + std::to_string(byte_size) + " bytes does not fit input '" +
                             input.name() + "' of model '" + model_name + "' (" + Describe(dtype, shape) +
                             "): expected " + std::to_string(*row_bytes) + " bytes");
    }
    return shape;
  }
  if (*row_bytes == 0 || byte_size % *row_bytes != 0) {
    return InvalidArgument("raw request body of " + std::to_string(byte_size) + " bytes does not fit input '" +
                           input.name() + "' of model '" + model_name + "' (" + Describe(dtype, shape) +
                           "): its variable dimension cannot be deduced unless the size is a multiple of " +
                           std::to_string(*row_bytes) + " bytes");
  }
  shape[*variable] = static_cast<int64_t>(byte_size / *row_bytes);
  return shape;
}

}  // namespace

bool IsRawRequestHeaderLength(std::string_view header_length) {
  const size_t first = header_length.find_first_not_of(" \t");
  if (first == std::string_view::npos) return false;
  const size_t last = header_length.find_last_not_of(" \t");
  const std::string_view digits = header_length.substr(first, last - first + 1);
  return !digits.empty() && digits.find_first_not_of('0') == std::string_view::npos;
}

Result<DecodedInferRequest> DecodeRawInferRequest(std::shared_ptr<const std::string> body,
                                                  const std::string& model_name,
                                                  const inference::ModelConfig& config,
                                                  const InferDecodeOptions& options) {
  if (config.input_size() != 1) {
    return InvalidArgument("Raw request must only have 1 input (found 1) to be deduced but got " +
                           std::to_string(config.input_size()) + " inputs in '" + model_name +
                           "' model configuration");
  }
  const inference::ModelInput& input = config.input(0);
  const DataType dtype = FromConfigDataType(input.data_type());
  if (dtype == DataType::kInvalid) {
    return InvalidArgument("raw input '" + input.name() + "' of model '" + model_name +
                           "' has a datatype raw requests cannot carry");
  }
  auto shape = DeduceShape(model_name, input, dtype, config.max_batch_size() > 0, body->size());
  if (!shape.ok()) return shape.status();
  const std::optional<uint64_t> elements = ElementCount(*shape);
  if (!elements || *elements > options.max_tensor_elements) {
    return Status(StatusCode::kPayloadTooLarge,
                  "raw input '" + input.name() + "' has shape " + ShapeToString(*shape) + ", more than " +
                      std::to_string(options.max_tensor_elements) + " elements (--max-tensor-elements)");
  }

  DecodedInferRequest out;
  out.request = std::make_unique<InferenceRequest>();
  out.binary_data_output = true;  // Triton returns every output of a raw request as binary data
  out.outputs_listed = false;
  Tensor& tensor = out.request->inputs.emplace_back();
  tensor.name = input.name();
  tensor.dtype = dtype;
  tensor.shape = std::move(*shape);
  if (dtype == DataType::kBytes) {
    // The one element in the KServe binary form: its 4-byte little-endian
    // length, then its bytes.
    if (body->size() > std::numeric_limits<uint32_t>::max())
      return InvalidArgument("raw BYTES input '" + input.name() + "' is over 4 GiB");
    const auto length = static_cast<uint32_t>(body->size());
    std::vector<std::byte> element(sizeof(length) + body->size());
    for (size_t i = 0; i < sizeof(length); ++i) element[i] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
    if (!body->empty()) std::memcpy(element.data() + sizeof(length), body->data(), body->size());
    tensor.data = TensorData::FromVector(std::move(element));
  } else {
    const auto* bytes = reinterpret_cast<const std::byte*>(body->data());
    const size_t size = body->size();
    tensor.data = TensorData(std::move(body), bytes, size);
  }
  return out;
}

}  // namespace ortserve::http
