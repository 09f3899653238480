#include "server/grpc/GrpcInferCodec.h"

#include <bit>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "server/common/SequenceParameterChecks.h"
#include "server/common/TensorLimits.h"
#include "server/grpc/SharedMemoryCalls.h"

namespace ortserve::grpcfe {
namespace {

static_assert(std::endian::native == std::endian::little,
              "tensors travel little endian; typed contents are viewed in place");

using google::protobuf::RepeatedField;
using google::protobuf::RepeatedPtrField;
using InputTensor = inference::ModelInferRequest::InferInputTensor;

// A typed field whose element type is the tensor's element type: viewed in place.
template <typename Wire>
TensorData View(const std::shared_ptr<const void>& owner, const RepeatedField<Wire>& field) {
  return TensorData(owner, reinterpret_cast<const std::byte*>(field.data()),
                    static_cast<size_t>(field.size()) * sizeof(Wire));
}

// A typed field wider than the tensor's element type (int32 for INT8/INT16,
// uint32 for UINT8/UINT16, bool for BOOL): converted, values range-checked.
template <typename Target, typename Wire>
Result<TensorData> Narrow(const InputTensor& input, const RepeatedField<Wire>& field) {
  std::vector<std::byte> bytes(static_cast<size_t>(field.size()) * sizeof(Target));
  for (int i = 0; i < field.size(); ++i) {
    const Wire value = field.Get(i);
    if constexpr (!std::is_same_v<Wire, bool>) {
      if (value < static_cast<Wire>(std::numeric_limits<Target>::min()) ||
          value > static_cast<Wire>(std::numeric_limits<Target>::max())) {
        return InvalidArgument("input '" + input.name() + "': element " + std::to_string(i) +
                               " = " + std::to_string(value) + " is out of range for " +
                               input.datatype());
      }
    }
    const Target narrowed = static_cast<Target>(value);
    std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(Target), &narrowed, sizeof(Target));
  }
  return TensorData::FromVector(std::move(bytes));
}

// BYTES elements into the length-prefixed form every layer uses.
Result<TensorData> LengthPrefixed(const InputTensor& input, const RepeatedPtrField<std::string>& field) {
  size_t total = 0;
  for (const std::string& element : field) {
    if (element.size() > std::numeric_limits<uint32_t>::max()) {
      return InvalidArgument("input '" + input.name() + "': a BYTES element is over 4 GiB");
    }
    total += 4 + element.size();
  }
  std::vector<std::byte> bytes(total);
  std::byte* cursor = bytes.data();
  for (const std::string& element : field) {
    const uint32_t length = static_cast<uint32_t>(element.size());
    std::memcpy(cursor, &length, 4);
    if (length > 0) std::memcpy(cursor + 4, element.data(), length);
    cursor += 4 + length;
  }
  return TensorData::FromVector(std::move(bytes));
}

Status CheckCount(const InputTensor& input, uint64_t expected, int64_t actual, const char* field) {
  if (static_cast<uint64_t>(actual) == expected) return Status::Ok();
  return InvalidArgument("input '" + input.name() + "' with shape " +
                         ShapeToString(Shape(input.shape().begin(), input.shape().end())) +
                         " needs " + std::to_string(expected) + " elements but contents." + field +
                         " holds " + std::to_string(actual));
}

// Typed contents -> tensor bytes, for every datatype that has a typed field.
Result<TensorData> DecodeTypedContents(const std::shared_ptr<const void>& owner,
                                       const InputTensor& input, DataType dtype, uint64_t count) {
  const inference::InferTensorContents& c = input.contents();
#define ORTSERVE_CHECK_COUNT(field)                                                  \
  do {                                                                               \
    Status _st = CheckCount(input, count, c.field##_size(), #field);                 \
    if (!_st.ok()) return _st;                                                       \
  } while (0)
  switch (dtype) {
    case DataType::kBool:
      ORTSERVE_CHECK_COUNT(bool_contents);
      return Narrow<uint8_t>(input, c.bool_contents());
    case DataType::kInt8:
      ORTSERVE_CHECK_COUNT(int_contents);
      return Narrow<int8_t>(input, c.int_contents());
    case DataType::kInt16:
      ORTSERVE_CHECK_COUNT(int_contents);
      return Narrow<int16_t>(input, c.int_contents());
    case DataType::kInt32:
      ORTSERVE_CHECK_COUNT(int_contents);
      return View(owner, c.int_contents());
    case DataType::kInt64:
      ORTSERVE_CHECK_COUNT(int64_contents);
      return View(owner, c.int64_contents());
    case DataType::kUint8:
      ORTSERVE_CHECK_COUNT(uint_contents);
      return Narrow<uint8_t>(input, c.uint_contents());
    case DataType::kUint16:
      ORTSERVE_CHECK_COUNT(uint_contents);
      return Narrow<uint16_t>(input, c.uint_contents());
    case DataType::kUint32:
      ORTSERVE_CHECK_COUNT(uint_contents);
      return View(owner, c.uint_contents());
    case DataType::kUint64:
      ORTSERVE_CHECK_COUNT(uint64_contents);
      return View(owner, c.uint64_contents());
    case DataType::kFp32:
      ORTSERVE_CHECK_COUNT(fp32_contents);
      return View(owner, c.fp32_contents());
    case DataType::kFp64:
      ORTSERVE_CHECK_COUNT(fp64_contents);
      return View(owner, c.fp64_contents());
    case DataType::kBytes:
      ORTSERVE_CHECK_COUNT(bytes_contents);
      return LengthPrefixed(input, c.bytes_contents());
    case DataType::kFp16:
    case DataType::kBf16:
      return InvalidArgument("input '" + input.name() + "': " + input.datatype() +
                             " has no typed contents field; send it in raw_input_contents");
    case DataType::kInvalid:
      break;
  }
#undef ORTSERVE_CHECK_COUNT
  return InvalidArgument("input '" + input.name() + "' has invalid datatype");
}

// Non-negative integer parameter (int64 or uint64 form).
Result<uint64_t> UnsignedParameter(const std::string& name, const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      if (p.int64_param() < 0) {
        return InvalidArgument("parameter '" + name + "' must not be negative, got " +
                               std::to_string(p.int64_param()));
      }
      return static_cast<uint64_t>(p.int64_param());
    case inference::InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      return InvalidArgument("parameter '" + name + "' must be an integer");
  }
}

const char* ParameterKind(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam: return "bool_param";
    case inference::InferParameter::kInt64Param: return "int64_param";
    case inference::InferParameter::kStringParam: return "string_param";
    case inference::InferParameter::kDoubleParam: return "double_param";
    case inference::InferParameter::kUint64Param: return "uint64_param";
    case inference::InferParameter::PARAMETER_CHOICE_NOT_SET: break;
  }
  return "no value";
}

// Triton's gRPC front end takes sequence_id as int64_param (what tritonclient
// sends for a number) or string_param; uint64_param also carries the ids
// above INT64_MAX. A negative int64 is refused rather than wrapped around.
Status DecodeSequenceId(const inference::InferParameter& p, SequenceParameters* sequence) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param:
      if (p.int64_param() < 0) {
        return InvalidArgument("invalid value for 'sequence_id' parameter: " + std::to_string(p.int64_param()) +
                               " is negative; a numeric sequence id is an unsigned 64-bit integer");
      }
      sequence->id = static_cast<uint64_t>(p.int64_param());
      return Status::Ok();
    case inference::InferParameter::kUint64Param:
      sequence->id = p.uint64_param();
      return Status::Ok();
    case inference::InferParameter::kStringParam:
      sequence->string_id = p.string_param();  // its length: common::CheckSequenceParameters
      return Status::Ok();
    default:
      return InvalidArgument(std::string("invalid value type for 'sequence_id' parameter, expected int64_param, "
                                         "uint64_param or string_param, got ") +
                             ParameterKind(p));
  }
}

// sequence_start / sequence_end: bool_param only, as Triton.
Status DecodeSequenceFlag(const std::string& name, const inference::InferParameter& p, bool* flag) {
  if (p.parameter_choice_case() != inference::InferParameter::kBoolParam) {
    return InvalidArgument("invalid value type for '" + name + "' parameter, expected bool_param, got " +
                           ParameterKind(p));
  }
  *flag = p.bool_param();
  return Status::Ok();
}

Status DecodeRequestParameters(const inference::ModelInferRequest& message, InferenceRequest* out) {
  for (const auto& [name, value] : message.parameters()) {
    if (name == "timeout") {
      Result<uint64_t> timeout = UnsignedParameter(name, value);
      if (!timeout.ok()) return timeout.status();
      out->timeout_us = *timeout;
    } else if (name == "priority") {
      Result<uint64_t> priority = UnsignedParameter(name, value);
      if (!priority.ok()) return priority.status();
      if (*priority > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgument("parameter 'priority' = " + std::to_string(*priority) +
                               " is over the largest priority level " +
                               std::to_string(std::numeric_limits<uint32_t>::max()));
      }
      out->priority = static_cast<uint32_t>(*priority);
    } else if (name == "sequence_id") {
      ORTSERVE_RETURN_IF_ERROR(DecodeSequenceId(value, &out->sequence));
    } else if (name == "sequence_start") {
      ORTSERVE_RETURN_IF_ERROR(DecodeSequenceFlag(name, value, &out->sequence.start));
    } else if (name == "sequence_end") {
      ORTSERVE_RETURN_IF_ERROR(DecodeSequenceFlag(name, value, &out->sequence.end));
    }
    // binary_data_output, triton_* and custom parameters are accepted and ignored.
  }
  return common::CheckSequenceParameters(out->sequence);
}

// Triton's classification parameter of a requested output: an int64_param
// above 0 (the number of classes), worded as Triton words its refusals.
Status DecodeClassification(const inference::ModelInferRequest::InferRequestedOutputTensor& output,
                            RequestedOutput* requested) {
  auto it = output.parameters().find("classification");
  if (it == output.parameters().end()) return Status::Ok();
  const inference::InferParameter& p = it->second;
  if (p.parameter_choice_case() != inference::InferParameter::kInt64Param) {
    return InvalidArgument("output '" + output.name() +
                           "': invalid value type for 'classification' parameter, expected int64_param, got " +
                           ParameterKind(p));
  }
  if (p.int64_param() <= 0) {
    return InvalidArgument("output '" + output.name() + "': invalid value for 'classification' parameter, expected "
                           "a number of classes above 0, got " + std::to_string(p.int64_param()));
  }
  requested->classification = static_cast<uint64_t>(p.int64_param());
  return Status::Ok();
}

}  // namespace

grpc::StatusCode ToGrpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kUnsupported: return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kCancelled: return grpc::StatusCode::CANCELLED;
    case StatusCode::kPayloadTooLarge: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(status.code()), status.message());
}

Status DecodeInferRequest(std::shared_ptr<const inference::ModelInferRequest> message, InferenceRequest* out,
                          uint64_t max_tensor_elements, common::SharedMemoryRefs* shared_memory) {
  const inference::ModelInferRequest& m = *message;
  const std::shared_ptr<const void> owner = message;
  out->model_name = m.model_name();
  out->model_version = m.model_version();
  out->id = m.id();
  ORTSERVE_RETURN_IF_ERROR(DecodeRequestParameters(m, out));

  const bool raw = m.raw_input_contents_size() > 0;
  const int in_regions = CountSharedMemoryInputs(m);
  if (raw && m.raw_input_contents_size() != m.inputs_size() - in_regions) {
    return InvalidArgument("request has " + std::to_string(m.inputs_size() - in_regions) +
                           " inputs outside shared memory but " + std::to_string(m.raw_input_contents_size()) +
                           " raw_input_contents; give one per such input, in input order, or none");
  }
  int next_raw = 0;
  out->inputs.clear();
  out->inputs.reserve(static_cast<size_t>(m.inputs_size()));
  for (int i = 0; i < m.inputs_size(); ++i) {
    const InputTensor& input = m.inputs(i);
    Tensor tensor;
    tensor.name = input.name();
    const std::optional<DataType> dtype = DataTypeFromName(input.datatype());
    if (!dtype || *dtype == DataType::kInvalid) {
      return InvalidArgument("input '" + input.name() + "' has unknown datatype '" +
                             input.datatype() + "'");
    }
    tensor.dtype = *dtype;
    tensor.shape.assign(input.shape().begin(), input.shape().end());
    Result<uint64_t> count = common::LimitedElementCount(input.name(), tensor.dtype, tensor.shape, max_tensor_elements);
    if (!count.ok()) return count.status();
    auto region = SharedMemoryRefOf(input.parameters(), "input", input.name());
    if (!region.ok()) return region.status();
    if (region->has_value()) {
      if (!shared_memory) return Unsupported("input '" + input.name() + "': shared memory inputs are not supported");
      if (input.has_contents()) {
        return InvalidArgument("input '" + input.name() + "' has both contents and shared_memory_region");
      }
      shared_memory->inputs.emplace_back(static_cast<size_t>(i), std::move(**region));
      out->inputs.push_back(std::move(tensor));
      continue;
    }
    if (raw) {
      if (input.has_contents()) {
        return InvalidArgument("input '" + input.name() +
                               "' has typed contents although the request uses raw_input_contents");
      }
      const std::string& bytes = m.raw_input_contents(next_raw++);
      tensor.data = TensorData(owner, reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
    } else {
      Result<TensorData> data = DecodeTypedContents(owner, input, tensor.dtype, *count);
      if (!data.ok()) return data.status();
      tensor.data = std::move(data).value();
    }
    out->inputs.push_back(std::move(tensor));
  }

  out->requested_outputs.clear();
  out->requested_outputs.reserve(static_cast<size_t>(m.outputs_size()));
  for (const auto& output : m.outputs()) {
    auto region = SharedMemoryRefOf(output.parameters(), "output", output.name());
    if (!region.ok()) return region.status();
    if (region->has_value()) {
      if (!shared_memory) return Unsupported("output '" + output.name() + "': shared memory outputs are not supported");
      shared_memory->outputs.emplace_back(out->requested_outputs.size(), std::move(**region));
    }
    RequestedOutput requested{.name = output.name(), .binary_data = true};
    ORTSERVE_RETURN_IF_ERROR(DecodeClassification(output, &requested));
    out->requested_outputs.push_back(std::move(requested));
  }
  return Status::Ok();
}

void EncodeInferResponse(const InferenceResponse& response, const std::string& request_id,
                         inference::ModelInferResponse* out, const SharedMemoryPlacements* in_shared_memory) {
  out->set_model_name(response.model_name);
  out->set_model_version(response.model_version);
  out->set_id(request_id);
  for (const auto& [key, value] : response.parameters) {
    (*out->mutable_parameters())[key].set_string_param(value);
  }
  out->mutable_outputs()->Reserve(static_cast<int>(response.outputs.size()));
  out->mutable_raw_output_contents()->Reserve(static_cast<int>(response.outputs.size()));
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& tensor = response.outputs[i];
    auto* output = out->add_outputs();
    output->set_name(tensor.name);
    output->set_datatype(std::string(DataTypeName(tensor.dtype)));
    output->mutable_shape()->Add(tensor.shape.begin(), tensor.shape.end());
    if (in_shared_memory && i < in_shared_memory->size() && (*in_shared_memory)[i]) {
      const common::SharedMemoryPlacement& placed = *(*in_shared_memory)[i];
      auto& parameters = *output->mutable_parameters();
      parameters[std::string(common::kShmRegionParameter)].set_string_param(placed.region);
      parameters[std::string(common::kShmOffsetParameter)].set_int64_param(static_cast<int64_t>(placed.offset));
      parameters[std::string(common::kShmByteSizeParameter)].set_int64_param(static_cast<int64_t>(placed.byte_size));
      out->add_raw_output_contents();
      continue;
    }
    out->add_raw_output_contents()->assign(reinterpret_cast<const char*>(tensor.data.data()),
                                           tensor.data.size());
  }
}

}  // namespace ortserve::grpcfe
