#include "config/ConfigTypes.h"

#include <optional>

namespace ortserve {

Shape ConfigDims(const google::protobuf::RepeatedField<int64_t>& dims) {
  return Shape(dims.begin(), dims.end());
}

DataType FromConfigDataType(inference::DataType type) {
  switch (type) {
    case inference::TYPE_BOOL: return DataType::kBool;
    case inference::TYPE_UINT8: return DataType::kUint8;
    case inference::TYPE_UINT16: return DataType::kUint16;
    case inference::TYPE_UINT32: return DataType::kUint32;
    case inference::TYPE_UINT64: return DataType::kUint64;
    case inference::TYPE_INT8: return DataType::kInt8;
    case inference::TYPE_INT16: return DataType::kInt16;
    case inference::TYPE_INT32: return DataType::kInt32;
    case inference::TYPE_INT64: return DataType::kInt64;
    case inference::TYPE_FP16: return DataType::kFp16;
    case inference::TYPE_FP32: return DataType::kFp32;
    case inference::TYPE_FP64: return DataType::kFp64;
    case inference::TYPE_STRING: return DataType::kBytes;
    case inference::TYPE_BF16: return DataType::kBf16;
    default: return DataType::kInvalid;
  }
}

inference::DataType ToConfigDataType(DataType type) {
  switch (type) {
    case DataType::kBool: return inference::TYPE_BOOL;
    case DataType::kUint8: return inference::TYPE_UINT8;
    case DataType::kUint16: return inference::TYPE_UINT16;
    case DataType::kUint32: return inference::TYPE_UINT32;
    case DataType::kUint64: return inference::TYPE_UINT64;
    case DataType::kInt8: return inference::TYPE_INT8;
    case DataType::kInt16: return inference::TYPE_INT16;
    case DataType::kInt32: return inference::TYPE_INT32;
    case DataType::kInt64: return inference::TYPE_INT64;
    case DataType::kFp16: return inference::TYPE_FP16;
    case DataType::kFp32: return inference::TYPE_FP32;
    case DataType::kFp64: return inference::TYPE_FP64;
    case DataType::kBytes: return inference::TYPE_STRING;
    case DataType::kBf16: return inference::TYPE_BF16;
    case DataType::kInvalid: break;
  }
  return inference::TYPE_INVALID;
}

Result<Shape> ReshapeDims(const Shape& from, const Shape& to_dims) {
  auto count = ElementCount(from);
  if (!count) return InvalidArgument("invalid shape " + ShapeToString(from));
  Shape out = to_dims;
  int unknown = -1;
  uint64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0) {
      if (unknown >= 0) {
        return InvalidArgument("cannot reshape " + ShapeToString(from) + " to " +
                               ShapeToString(to_dims) + ": more than one -1");
      }
      unknown = static_cast<int>(i);
    } else if (const std::optional<uint64_t> product =
                   CheckedMultiply(known, static_cast<uint64_t>(out[i]))) {
      known = *product;
    } else {
      return InvalidArgument("cannot reshape " + ShapeToString(from) + " to " +
                             ShapeToString(to_dims) + ": element count overflows 64 bits");
    }
  }
  if (unknown >= 0) {
    if (known == 0 || *count % known != 0) {
      return InvalidArgument("cannot reshape " + ShapeToString(from) + " to " + ShapeToString(to_dims));
    }
    out[static_cast<size_t>(unknown)] = static_cast<int64_t>(*count / known);
  } else if (known != *count) {
    return InvalidArgument("cannot reshape " + ShapeToString(from) + " to " + ShapeToString(to_dims));
  }
  return out;
}

}  // namespace ortserve
