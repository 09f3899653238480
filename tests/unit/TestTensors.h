#pragma once
// Tensor builders and readers shared by the unit tests.
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

}  // namespace ortserve::testing_util
