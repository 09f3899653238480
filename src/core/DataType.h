#pragma once
// Tensor element types, named as the KServe v2 protocol names them ("FP32"),
// with conversions to Triton's config names ("TYPE_FP32").
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ortserve {

enum class DataType {
  kInvalid,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBf16,
  kBytes,  // variable-length strings; serialized as 4-byte LE length + bytes
};

// "FP32", "BYTES", ... ; "INVALID" for kInvalid.
std::string_view DataTypeName(DataType type);
// Parses a KServe name ("FP32"); nullopt if unknown.
std::optional<DataType> DataTypeFromName(std::string_view name);
// "TYPE_FP32", "TYPE_STRING" for BYTES.
std::string_view DataTypeConfigName(DataType type);
// Parses "TYPE_FP32" / "TYPE_STRING"; nullopt if unknown.
std::optional<DataType> DataTypeFromConfigName(std::string_view name);
// Bytes per element; 0 for kBytes and kInvalid (variable size).
size_t DataTypeSize(DataType type);

// One FP16 (IEEE half) or BF16 element, widened to float exactly
// (subnormals, infinities and NaN included).
float HalfToFloat(uint16_t h);
float Bf16ToFloat(uint16_t b);

}  // namespace ortserve
