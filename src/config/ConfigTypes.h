#pragma once
// The vocabulary of a Triton model config (model_config.proto) shared by the
// config rules, the request path and the front ends: data types, dims,
// reshapes, the ONNX platform names. Pure functions.
#include "core/DataType.h"
#include "core/Status.h"
#include "core/Tensor.h"
#include "model_config.pb.h"  // generated from proto/model_config.proto (Triton's ModelConfig)

namespace ortserve {

inline constexpr const char* kOnnxPlatform = "onnxruntime_onnx";
inline constexpr const char* kOnnxBackend = "onnxruntime";
inline constexpr const char* kDefaultModelFilename = "model.onnx";

// Config <-> core data type. TYPE_STRING is BYTES.
DataType FromConfigDataType(inference::DataType type);
inference::DataType ToConfigDataType(DataType type);

// Maps `from` onto `to_dims` with the same element count; one -1 in `to_dims`
// is inferred. kInvalidArgument if the counts cannot match.
Result<Shape> ReshapeDims(const Shape& from, const Shape& to_dims);

// Dims of a config tensor as a Shape.
Shape ConfigDims(const google::protobuf::RepeatedField<int64_t>& dims);

}  // namespace ortserve
