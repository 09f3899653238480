#include "runtime/InputStaging.h"

#include <cstdint>
#include <cstring>

#include "runtime/OrtDataType.h"

namespace ortserve {

InputStaging::InputStaging(std::vector<TensorSignature> inputs, std::string model)
    : inputs_(std::move(inputs)),
      model_(std::move(model)),
      matched_(inputs_.size()),
      scratch_(inputs_.size()),
      cpu_memory_(Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault)) {}

Status InputStaging::Stage(const std::vector<Tensor>& tensors, std::vector<Ort::Value>* values) {
  // Each model input must be given exactly once; after that, any extra tensor
  // is one the model does not have.
  for (size_t i = 0; i < inputs_.size(); ++i) {
    matched_[i] = nullptr;
    size_t found = 0;
    for (const Tensor& tensor : tensors) {
      if (tensor.name != inputs_[i].name) continue;
      matched_[i] = &tensor;
      ++found;
    }
    if (found == 0)
      return InvalidArgument("model '" + model_ + "' input '" + inputs_[i].name + "' is missing");
    if (found > 1) {
      return InvalidArgument("model '" + model_ + "' input '" + inputs_[i].name + "' was given " +
                             std::to_string(found) + " times");
    }
  }
  if (tensors.size() != inputs_.size()) {
    for (const Tensor& tensor : tensors) {
      bool known = false;
      for (const auto& input : inputs_) known = known || input.name == tensor.name;
      if (!known)
        return InvalidArgument("model '" + model_ + "' has no input named '" + tensor.name + "'");
    }
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    ORTSERVE_RETURN_IF_ERROR(Validate(inputs_[i], *matched_[i]));
  }
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Tensor& tensor = *matched_[i];
    values->push_back(tensor.dtype == DataType::kBytes ? StageBytes(tensor)
                                                       : StageFixedSize(i, tensor));
  }
  return Status::Ok();
}

Status InputStaging::Validate(const TensorSignature& expected, const Tensor& tensor) const {
  const std::string where = "model '" + model_ + "' input '" + tensor.name + "'";
  if (tensor.dtype != expected.dtype) {
    return InvalidArgument(where + " expects data type " + std::string(DataTypeName(expected.dtype)) +
                           ", got " + std::string(DataTypeName(tensor.dtype)));
  }
  if (tensor.data.data() == nullptr && tensor.data.size() != 0)
    return Internal(where + " has no data but a size of " + std::to_string(tensor.data.size()));
  const auto elements = ElementCount(tensor.shape);
  if (!elements)
    return InvalidArgument(where + " has an invalid shape " + ShapeToString(tensor.shape));
  if (tensor.dtype == DataType::kBytes) {
    const auto count = CountBytesElements(tensor.data.data(), tensor.data.size());
    if (!count || *count != *elements) {
      return InvalidArgument(where + " of shape " + ShapeToString(tensor.shape) + " needs " +
                             std::to_string(*elements) + " length-prefixed BYTES elements, got " +
                             (count ? std::to_string(*count) : std::string("malformed data")));
    }
    return Status::Ok();
  }
  const auto bytes = FixedByteSize(tensor.dtype, tensor.shape);
  if (!bytes || *bytes != tensor.data.size()) {
    return InvalidArgument(where + " of type " + std::string(DataTypeName(tensor.dtype)) +
                           " and shape " + ShapeToString(tensor.shape) + " needs " +
                           (bytes ? std::to_string(*bytes) : std::string("too many")) +
                           " bytes, got " + std::to_string(tensor.data.size()));
  }
  return Status::Ok();
}

Ort::Value InputStaging::StageFixedSize(size_t index, const Tensor& tensor) {
  const size_t size = tensor.data.size();
  const std::byte* source = tensor.data.data();
  // ORT's API takes void* but never writes to an input value, so viewing the
  // caller's const bytes is safe.
  void* data = const_cast<std::byte*>(source);
  const size_t alignment = DataTypeSize(tensor.dtype);  // all are powers of two
  if (size == 0) {
    data = empty_;
  } else if (reinterpret_cast<uintptr_t>(source) % alignment != 0) {
    std::vector<std::byte>& scratch = scratch_[index];
    if (scratch.size() < size) scratch.resize(size);  // operator new aligns to 16
    std::memcpy(scratch.data(), source, size);
    data = scratch.data();
  }
  return Ort::Value::CreateTensor(cpu_memory_, data, size, tensor.shape.data(), tensor.shape.size(),
                                  OrtElementType(tensor.dtype));
}

Ort::Value InputStaging::StageBytes(const Tensor& tensor) {
  Ort::Value value = Ort::Value::CreateTensor(allocator_, tensor.shape.data(), tensor.shape.size(),
                                              ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING);
  // Validate() has checked that the prefixes exactly cover the buffer.
  const std::byte* data = tensor.data.data();
  size_t pos = 0;
  for (size_t element = 0; pos < tensor.data.size(); ++element) {
    uint32_t length;
    std::memcpy(&length, data + pos, sizeof length);  // little-endian host
    pos += sizeof length;
    // Element-by-element with explicit lengths: FillStringTensor would stop
    // at the first NUL, and BYTES may be arbitrary binary data.
    char* dest = value.GetResizedStringTensorElementBuffer(element, length);
    if (length) std::memcpy(dest, data + pos, length);
    pos += length;
  }
  return value;
}

}  // namespace ortserve
