#include "runtime/OrtDataType.h"

#include <array>

namespace ortserve {
namespace {

struct TypePair {
  DataType dtype;
  ONNXTensorElementDataType ort;
};

constexpr std::array<TypePair, 14> kTypePairs = {{
    {DataType::kBool, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL},
    {DataType::kUint8, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8},
    {DataType::kUint16, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16},
    {DataType::kUint32, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32},
    {DataType::kUint64, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64},
    {DataType::kInt8, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8},
    {DataType::kInt16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16},
    {DataType::kInt32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32},
    {DataType::kInt64, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64},
    {DataType::kFp16, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16},
    {DataType::kFp32, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT},
    {DataType::kFp64, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE},
    {DataType::kBf16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16},
    {DataType::kBytes, ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING},
}};

}  // namespace

std::optional<DataType> DataTypeFromOrt(ONNXTensorElementDataType type) {
  for (const auto& p : kTypePairs)
    if (p.ort == type) return p.dtype;
  return std::nullopt;
}

ONNXTensorElementDataType OrtElementType(DataType type) {
  for (const auto& p : kTypePairs)
    if (p.dtype == type) return p.ort;
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

std::string_view OrtElementTypeName(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED: return "undefined";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "uint8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "int8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return "uint16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return "int16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "int64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING: return "string";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return "bool";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "double";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return "uint32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return "uint64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64: return "complex64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128: return "complex128";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bfloat16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN: return "float8e4m3fn";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ: return "float8e4m3fnuz";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2: return "float8e5m2";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ: return "float8e5m2fnuz";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT4: return "uint4";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT4: return "int4";
    default: return "an element type unknown to ortserve";
  }
}

}  // namespace ortserve
