#include "server/http/RequestParameters.h"

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "server/common/SequenceParameterChecks.h"

namespace ortserve::http {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

bool ToUnsigned(element e, uint64_t* v) {
  return e.type() != element_type::DOUBLE && e.get_uint64().get(*v) == simdjson::SUCCESS;
}

// What came instead of what was expected, with the number itself where the
// kind alone does not say what is wrong with it.
std::string DescribeGot(element e) {
  if (int64_t v; e.type() == element_type::INT64 && e.get_int64().get(v) == simdjson::SUCCESS && v < 0)
    return "a negative number (" + std::to_string(v) + ")";
  if (e.type() == element_type::DOUBLE) return "a number that is not an integer";
  return DescribeJsonValue(e.type());
}

// Triton's HTTP front end words a parameter it cannot read "Unable to parse
// '<name>'"; the rest says what it must be and what it was.
Status Unparsable(std::string_view name, std::string_view expected, element got) {
  return InvalidArgument("Unable to parse '" + std::string(name) + "': expected " + std::string(expected) +
                         ", got " + DescribeGot(got));
}

// The correlation parameters seen so far in this request.
struct SequenceKeysSeen {
  bool id = false;
  bool start = false;
  bool end = false;
};

// One of sequence_id, sequence_start and sequence_end. A string id's length
// is checked with the rest (common::CheckSequenceParameters).
Status DecodeSequenceParameter(std::string_view key, element value, SequenceKeysSeen* seen,
                               SequenceParameters* sequence) {
  bool* once = key == "sequence_id" ? &seen->id : key == "sequence_start" ? &seen->start : &seen->end;
  if (*once) return InvalidArgument("parameter '" + std::string(key) + "' is given more than once");
  *once = true;
  if (key == "sequence_id") {
    if (ToUnsigned(value, &sequence->id)) return Status::Ok();
    std::string_view s;
    if (value.get_string().get(s) != simdjson::SUCCESS)
      return Unparsable(key, "an unsigned 64-bit integer or a string", value);
    sequence->string_id = s;
    return Status::Ok();
  }
  bool* flag = key == "sequence_start" ? &sequence->start : &sequence->end;
  if (value.get_bool().get(*flag) != simdjson::SUCCESS) return Unparsable(key, "true or false", value);
  return Status::Ok();
}

bool IsSequenceKey(std::string_view key) {
  return key == "sequence_id" || key == "sequence_start" || key == "sequence_end";
}

}  // namespace

const char* DescribeJsonValue(element_type t) {
  switch (t) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE: return "a number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "a value";
}

Status DecodeRequestParameters(simdjson::dom::object params, InferenceRequest* req, bool* binary_data_output) {
  SequenceKeysSeen seen;
  for (auto field : params) {
    const std::string_view key = field.key;
    if (key == "timeout") {
      if (!ToUnsigned(field.value, &req->timeout_us))
        return InvalidArgument("parameter 'timeout' must be a non-negative integer (microseconds)");
    } else if (key == "priority") {
      uint64_t v;
      if (!ToUnsigned(field.value, &v) || v > std::numeric_limits<uint32_t>::max())
        return InvalidArgument("parameter 'priority' must be a non-negative 32-bit integer");
      req->priority = static_cast<uint32_t>(v);
    } else if (key == "binary_data_output") {
      if (field.value.get_bool().get(*binary_data_output) != simdjson::SUCCESS)
        return InvalidArgument("parameter 'binary_data_output' must be a boolean");
    } else if (IsSequenceKey(key)) {
      ORTSERVE_RETURN_IF_ERROR(DecodeSequenceParameter(key, field.value, &seen, &req->sequence));
    }
  }
  return common::CheckSequenceParameters(req->sequence);
}

Status DecodeClassificationParameter(element value, std::string_view output, uint64_t* count) {
  if (ToUnsigned(value, count)) return Status::Ok();
  return InvalidArgument("output '" + std::string(output) +
                         "': Unable to set 'classification': expected a non-negative integer (the number of classes), "
                         "got " + DescribeGot(value));
}

}  // namespace ortserve::http
