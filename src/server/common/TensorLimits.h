#pragma once
// The tensor limit both front ends apply the same way, from the wire
// description of a tensor, before any of its data is decoded.
#include <cstdint>
#include <string_view>

#include "core/Status.h"
#include "core/Tensor.h"

namespace ortserve::common {

// --max-tensor-elements' default: a 64 MiB body of UINT8 fits.
inline constexpr uint64_t kDefaultMaxTensorElements = uint64_t{1} << 26;

// The element count of input `name` of `dtype` and `shape`. kInvalidArgument
// when the count or (fixed-size types) the byte size overflows 64 bits — a
// malformed shape, named before any limit — and kPayloadTooLarge (HTTP 400 as Triton,
// gRPC RESOURCE_EXHAUSTED) when the count exceeds `max_elements`
// (--max-tensor-elements). Messages name the input and its shape.
Result<uint64_t> LimitedElementCount(std::string_view name, DataType dtype, const Shape& shape,
                                     uint64_t max_elements);

}  // namespace ortserve::common
