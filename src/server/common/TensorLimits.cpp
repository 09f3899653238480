#include "server/common/TensorLimits.h"

#include <string>

namespace ortserve::common {

Result<uint64_t> LimitedElementCount(std::string_view name, DataType dtype, const Shape& shape,
                                     uint64_t max_elements) {
  const std::optional<uint64_t> count = ElementCount(shape);
  // Built only for an error: this runs for every input of every request.
  const auto input = [name] { return "input '" + std::string(name.substr(0, 128)) + "'"; };
  if (!count) return InvalidArgument(input() + ": element count of shape " + ShapeToString(shape) + " overflows");
  if (dtype != DataType::kBytes && !FixedByteSize(dtype, shape)) {
    return InvalidArgument(input() + ": byte size of " + std::string(DataTypeName(dtype)) + " " +
                           ShapeToString(shape) + " overflows");
  }
  if (*count > max_elements) {
    return Status(StatusCode::kPayloadTooLarge, input() + ": shape " + ShapeToString(shape) + " has " +
                                                    std::to_string(*count) + " elements, over the limit of " +
                                                    std::to_string(max_elements) + " (--max-tensor-elements)");
  }
  return *count;
}

}  // namespace ortserve::common
