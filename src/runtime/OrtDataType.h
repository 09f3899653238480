#pragma once
// Mapping between ONNX tensor element types and the KServe types of core/.
#include <onnxruntime_cxx_api.h>

#include <optional>
#include <string_view>

#include "core/DataType.h"

namespace ortserve {

// nullopt for ONNX types KServe cannot carry (complex, float8, int4, ...).
std::optional<DataType> DataTypeFromOrt(ONNXTensorElementDataType type);
// ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED for kInvalid.
ONNXTensorElementDataType OrtElementType(DataType type);
// ONNX spelling for error messages: "float", "float8e4m3fn", "complex64".
std::string_view OrtElementTypeName(ONNXTensorElementDataType type);

}  // namespace ortserve
