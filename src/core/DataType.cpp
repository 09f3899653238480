#include "core/DataType.h"

#include <bit>

#include <array>

namespace ortserve {
namespace {

struct TypeInfo {
  DataType type;
  std::string_view name;
  std::string_view config_name;
  size_t size;
};

constexpr std::array<TypeInfo, 14> kTypes = {{
    {DataType::kBool, "BOOL", "TYPE_BOOL", 1},
    {DataType::kUint8, "UINT8", "TYPE_UINT8", 1},
    {DataType::kUint16, "UINT16", "TYPE_UINT16", 2},
    {DataType::kUint32, "UINT32", "TYPE_UINT32", 4},
    {DataType::kUint64, "UINT64", "TYPE_UINT64", 8},
    {DataType::kInt8, "INT8", "TYPE_INT8", 1},
    {DataType::kInt16, "INT16", "TYPE_INT16", 2},
    {DataType::kInt32, "INT32", "TYPE_INT32", 4},
    {DataType::kInt64, "INT64", "TYPE_INT64", 8},
    {DataType::kFp16, "FP16", "TYPE_FP16", 2},
    {DataType::kFp32, "FP32", "TYPE_FP32", 4},
    {DataType::kFp64, "FP64", "TYPE_FP64", 8},
    {DataType::kBf16, "BF16", "TYPE_BF16", 2},
    {DataType::kBytes, "BYTES", "TYPE_STRING", 0},
}};

const TypeInfo* Find(DataType type) {
  for (const auto& t : kTypes)
    if (t.type == type) return &t;
  return nullptr;
}

}  // namespace

std::string_view DataTypeName(DataType type) {
  const TypeInfo* t = Find(type);
  return t ? t->name : "INVALID";
}

std::optional<DataType> DataTypeFromName(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.name == name) return t.type;
  return std::nullopt;
}

std::string_view DataTypeConfigName(DataType type) {
  const TypeInfo* t = Find(type);
  return t ? t->config_name : "TYPE_INVALID";
}

std::optional<DataType> DataTypeFromConfigName(std::string_view name) {
  for (const auto& t : kTypes)
    if (t.config_name == name) return t.type;
  return std::nullopt;
}

size_t DataTypeSize(DataType type) {
  const TypeInfo* t = Find(type);
  return t ? t->size : 0;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}

float Bf16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace ortserve
