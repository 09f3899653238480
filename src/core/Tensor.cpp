#include "core/Tensor.h"

#include <cstring>

namespace ortserve {

std::optional<uint64_t> CheckedMultiply(uint64_t a, uint64_t b) {
  uint64_t product;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

std::optional<uint64_t> ElementCount(const Shape& shape) {
  std::optional<uint64_t> count = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    count = CheckedMultiply(*count, static_cast<uint64_t>(d));
    if (!count) return std::nullopt;
  }
  return count;
}

std::optional<uint64_t> FixedByteSize(DataType type, const Shape& shape) {
  const size_t elem = DataTypeSize(type);
  if (elem == 0) return std::nullopt;
  auto count = ElementCount(shape);
  if (!count) return std::nullopt;
  return CheckedMultiply(*count, elem);
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

TensorData TensorData::FromVector(std::vector<std::byte> bytes) {
  auto holder = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  const std::byte* p = holder->data();
  size_t n = holder->size();
  return TensorData(std::move(holder), p, n);
}

TensorData TensorData::Copy(const void* data, size_t size) {
  std::vector<std::byte> bytes(size);
  if (size) std::memcpy(bytes.data(), data, size);
  return FromVector(std::move(bytes));
}

const Tensor* FindTensor(const std::vector<Tensor>& tensors, const std::string& name) {
  for (const Tensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::optional<uint64_t> CountBytesElements(const std::byte* data, size_t size) {
  uint64_t count = 0;
  size_t pos = 0;
  while (pos < size) {
    if (size - pos < 4) return std::nullopt;
    uint32_t len;
    std::memcpy(&len, data + pos, 4);  // little endian host (x86_64, aarch64)
    pos += 4;
    if (len > size - pos) return std::nullopt;
    pos += len;
    ++count;
  }
  return count;
}

}  // namespace ortserve
