#pragma once
// The request-level "parameters" object of an HTTP infer request: Triton's
// schedule policy (timeout, priority), its correlation parameters
// (sequence_id, sequence_start, sequence_end, as tritonclient.http sends
// them) and binary_data_output. Other keys (custom parameters, headers that
// clients forward) are not ours to interpret and pass untouched.
#include <simdjson.h>

#include <cstdint>
#include <string_view>

#include "core/InferenceRequest.h"
#include "core/Status.h"

namespace ortserve::http {

// What a JSON value is, as an error message says it ("data[3] is a string").
const char* DescribeJsonValue(simdjson::dom::element_type type);

// Fills req->timeout_us, req->priority, req->sequence and
// *binary_data_output from `params`. kInvalidArgument names the parameter:
//   timeout, priority      non-negative integers (priority: 32 bits)
//   sequence_id            an unsigned 64-bit integer or a string of at most
//                          128 characters (Triton's "Unable to parse
//                          'sequence_id'" when it is neither)
//   sequence_start, _end   booleans; true needs a sequence id
//   binary_data_output     a boolean
// A correlation parameter given twice is refused (the last one would
// silently win, and a number and a string would both name the sequence).
Status DecodeRequestParameters(simdjson::dom::object params, InferenceRequest* req, bool* binary_data_output);

// An output's "classification" parameter (Triton's classification
// extension) into *count: a non-negative integer; 0 asks for the tensor
// itself, as in Triton. kInvalidArgument naming the output otherwise, with
// Triton's "Unable to set 'classification'".
Status DecodeClassificationParameter(simdjson::dom::element value, std::string_view output, uint64_t* count);

}  // namespace ortserve::http
