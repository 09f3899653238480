#pragma once
// Tensors as they travel between layers. Tensor data is immutable and shared:
// a Tensor may view bytes inside a larger buffer (the HTTP body, an ORT output
// value) that its `owner` keeps alive, so decoding, batching of one request and
// splitting of outputs never copy.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/DataType.h"

namespace ortserve {

using Shape = std::vector<int64_t>;

// a * b; nullopt when the product does not fit in 64 bits. Every size
// computed from client or config dims goes through this (or the two below).
std::optional<uint64_t> CheckedMultiply(uint64_t a, uint64_t b);
// Product of dims; nullopt if a dim is negative or the product overflows.
std::optional<uint64_t> ElementCount(const Shape& shape);
// Bytes for a fixed-size type; nullopt on overflow, negative dims or BYTES.
std::optional<uint64_t> FixedByteSize(DataType type, const Shape& shape);
// "[1,3,224,224]"
std::string ShapeToString(const Shape& shape);

// Read-only bytes with shared ownership.
class TensorData {
 public:
  TensorData() = default;
  // Views [data, data+size) kept alive by owner.
  TensorData(std::shared_ptr<const void> owner, const std::byte* data, size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  // Takes ownership of a buffer.
  static TensorData FromVector(std::vector<std::byte> bytes);
  // Copies bytes.
  static TensorData Copy(const void* data, size_t size);

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::shared_ptr<const void>& owner() const { return owner_; }
  // A sub-range that shares the owner.
  TensorData Slice(size_t offset, size_t size) const { return TensorData(owner_, data_ + offset, size); }

 private:
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

struct Tensor {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  // Fixed-size types: elements in row-major order, little endian.
  // BYTES: for each element a 4-byte little-endian length then that many bytes
  // (the KServe binary tensor format), so every layer sees one representation.
  TensorData data;
};

// The tensor named `name` in `tensors`; null when there is none.
const Tensor* FindTensor(const std::vector<Tensor>& tensors, const std::string& name);

// Walks a BYTES buffer; returns the number of complete elements, or nullopt if a
// length prefix runs past the end or bytes are left over.
std::optional<uint64_t> CountBytesElements(const std::byte* data, size_t size);

}  // namespace ortserve
