#include "runtime/OutputTensors.h"

#include <cstdint>
#include <cstring>

#include "runtime/OrtDataType.h"

namespace ortserve {
namespace {

TensorData SerializeStrings(const Ort::Value& value, size_t count) {
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += sizeof(uint32_t) + value.GetStringTensorElementLength(i);
  std::vector<std::byte> bytes(total);
  std::byte* out = bytes.data();
  for (size_t i = 0; i < count; ++i) {
    const size_t length = value.GetStringTensorElementLength(i);
    const auto prefix = static_cast<uint32_t>(length);
    std::memcpy(out, &prefix, sizeof prefix);  // little-endian host
    out += sizeof prefix;
    if (length) value.GetStringTensorElement(length, i, out);
    out += length;
  }
  return TensorData::FromVector(std::move(bytes));
}

}  // namespace

Status ExportOutputs(const std::shared_ptr<std::vector<Ort::Value>>& values,
                     const std::vector<std::string>& names, std::string_view model,
                     std::vector<Tensor>* outputs) {
  for (size_t i = 0; i < values->size(); ++i) {
    const Ort::Value& value = (*values)[i];
    const std::string where = "model '" + std::string(model) + "' output '" + names[i] + "'";
    if (!value.IsTensor()) return Unsupported(where + " is not a tensor");
    const auto info = value.GetTensorTypeAndShapeInfo();
    const ONNXTensorElementDataType element_type = info.GetElementType();
    const auto dtype = DataTypeFromOrt(element_type);
    if (!dtype) {
      return Unsupported(where + " has element type " + std::string(OrtElementTypeName(element_type)) +
                         ", which has no KServe data type");
    }
    Tensor tensor{names[i], *dtype, info.GetShape(), {}};
    if (*dtype == DataType::kBytes) {
      tensor.data = SerializeStrings(value, info.GetElementCount());
    } else {
      const auto bytes = FixedByteSize(*dtype, tensor.shape);
      if (!bytes) return Internal(where + " has an invalid shape " + ShapeToString(tensor.shape));
      const auto* data = static_cast<const std::byte*>(value.GetTensorRawData());
      tensor.data = TensorData(values, data, static_cast<size_t>(*bytes));
    }
    outputs->push_back(std::move(tensor));
  }
  return Status::Ok();
}

}  // namespace ortserve
