#include "server/common/TensorLimits.h"

#include <cstdint>
#include <string>

namespace ortserve::common {

Result<uint64_t> LimitedElementCount(std::string_view name, DataType dtype, const Shape& shape,
                                     uint64_t max_elements) {
  const std::optional<uint64_t> count = ElementCount(shape);
  // Built only for an error: this runs for every input of every request.
  const auto input = [name] { return "input '" + std::string(name.substr(0, 128)) + "'"; };
  // Triton's words first (http_server.cc), which its L0_http test matches.
  if (!count) {
    return InvalidArgument("invalid shape for " + input() + ": shape " + ShapeToString(shape) +
                           " causes total element count to exceed maximum size of " +
                           std::to_string(INT64_MAX) + " (the element count overflows)");
  }
  if (dtype != DataType::kBytes && !FixedByteSize(dtype, shape)) {
    return InvalidArgument("byte size overflow for " + input() + ": element count (" + std::to_string(*count) +
                           ") * data type size (" + std::to_string(DataTypeSize(dtype)) +
                           ") exceeds maximum allowed size (" + std::to_string(INT64_MAX) + ") (byte size of " +
                           std::string(DataTypeName(dtype)) + " " + ShapeToString(shape) + ")");
  }
  if (*count > max_elements) {
    return Status(StatusCode::kPayloadTooLarge, input() + ": shape " + ShapeToString(shape) + " has " +
                                                    std::to_string(*count) + " elements, over the limit of " +
                                                    std::to_string(max_elements) + " (--max-tensor-elements)");
  }
  return *count;
}

}  // namespace ortserve::common
