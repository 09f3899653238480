#pragma once
// The shared_memory_* parameters of an HTTP infer request's inputs and
// requested outputs (Triton's system shared memory extension), read into
// common::SharedMemoryRefs; server/common/SharedMemoryParameters.h binds them
// to the registered regions once the request is decoded.
#include <cstddef>
#include <optional>
#include <string_view>

#include <simdjson.h>

#include "core/Status.h"
#include "server/common/SharedMemoryParameters.h"

namespace ortserve::http {

// Input `name` (inputs[index]) with `parameters` (its 'parameters' value, if
// any): true, and the reference added to refs->inputs, when it names a
// region. kInvalidArgument when the parameters are malformed, or when the
// input also has 'data' or binary_data_size (Triton's message: an input sets
// exactly one of the three).
Result<bool> DecodeInputSharedMemory(std::optional<simdjson::dom::element> parameters, std::string_view name,
                                     size_t index, bool has_data, bool has_binary, common::SharedMemoryRefs* refs);

// Requested output `name` (the index-th listed) with its 'parameters'
// object: adds its reference to refs->outputs when it names a region.
// kInvalidArgument when the parameters are malformed or also ask for
// binary_data: true (Triton's "Output can't set both ...").
Status DecodeOutputSharedMemory(simdjson::dom::object parameters, std::string_view name, size_t index,
                                common::SharedMemoryRefs* refs);

}  // namespace ortserve::http
