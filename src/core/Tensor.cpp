#include "core/Tensor.h"

#include <cstring>

namespace ortserve {

std::optional<uint64_t> ElementCount(const Shape& shape) {
  uint64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && count > UINT64_MAX / static_cast<uint64_t>(d)) return std::nullopt;
    count *= static_cast<uint64_t>(d);
  }
  return count;
}

std::optional<uint64_t> FixedByteSize(DataType type, const Shape& shape) {
  const size_t elem = DataTypeSize(type);
  if (elem == 0) return std::nullopt;
  auto count = ElementCount(shape);
  if (!count || (*count != 0 && *count > UINT64_MAX / elem)) return std::nullopt;
  return *count * elem;
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
