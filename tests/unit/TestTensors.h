#pragma once
// Tensor builders and readers shared by the unit tests.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/Tensor.h"

namespace ortserve::testing_util {

inline Tensor Fp32(std::string name, Shape shape, const std::vector<float>& values) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  t.data = TensorData::Copy(values.data(), values.size() * sizeof(float));
  return t;
}

inline std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

// BYTES elements in KServe's layout: a 4-byte little-endian length, then the bytes.
inline std::vector<std::byte> EncodeStrings(const std::vector<std::string>& strings) {
  std::vector<std::byte> bytes;
  for (const std::string& s : strings) {
    const uint32_t len = static_cast<uint32_t>(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(&len);
    bytes.insert(bytes.end(), p, p + 4);
    const auto* q = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), q, q + s.size());
  }
  return bytes;
}

inline std::vector<std::string> DecodeStrings(const TensorData& data) {
  std::vector<std::string> strings;
  size_t pos = 0;
  while (pos + 4 <= data.size()) {
    uint32_t len;
    std::memcpy(&len, data.data() + pos, 4);
    pos += 4;
    strings.emplace_back(reinterpret_cast<const char*>(data.data() + pos), len);
    pos += len;
  }
  return strings;
}

inline Tensor Strings(std::string name, Shape shape, const std::vector<std::string>& strings) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = DataType::kBytes;
  t.shape = std::move(shape);
  t.data = TensorData::FromVector(EncodeStrings(strings));
  return t;
}

}  // namespace ortserve::testing_util
