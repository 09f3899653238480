#include "scheduler/SequenceBatcherOptions.h"

#include <set>

namespace ortserve {
namespace {

bool IsBooleanKind(ControlInput::Kind kind) { return kind != ControlInput::Kind::kCorrelationId; }

Status CheckControl(const std::string& label, const ControlInput& c) {
  const std::string what = label + ": control input '" + c.name + "' (" + ControlKindName(c.kind) + ")";
  if (c.name.empty()) return InvalidArgument(label + ": a control input has no name");
  if (IsBooleanKind(c.kind)) {
    if (c.dtype != DataType::kInt32 && c.dtype != DataType::kFp32 && c.dtype != DataType::kBool) {
      return InvalidArgument(what + " must be INT32, FP32 or BOOL, got " + std::string(DataTypeName(c.dtype)));
    }
    return Status::Ok();
  }
  switch (c.dtype) {
    case DataType::kUint64:
    case DataType::kInt64:
    case DataType::kUint32:
    case DataType::kInt32:
    case DataType::kBytes:
      return Status::Ok();
    default:
      return InvalidArgument(what + " must be UINT64, INT64, UINT32, INT32 or BYTES, got " +
                             std::string(DataTypeName(c.dtype)));
  }
}

Status CheckState(const std::string& label, const StateTensor& s) {
  const std::string what = label + ": state '" + s.input_name + "' -> '" + s.output_name + "'";
  if (s.input_name.empty() || s.output_name.empty()) return InvalidArgument(label + ": a state has no input_name or output_name");
  if (DataTypeSize(s.dtype) == 0) {
    return InvalidArgument(what + " must have a fixed-size data type, got " + std::string(DataTypeName(s.dtype)));
  }
  for (int64_t d : s.dims) {
    if (d < 1) return InvalidArgument(what + ": dims " + ShapeToString(s.dims) + " must all be positive");
  }
  const auto bytes = FixedByteSize(s.dtype, s.dims);
  if (!bytes) return InvalidArgument(what + ": dims " + ShapeToString(s.dims) + " are too large");
  if (s.initial.size() != 0 && s.initial.size() != *bytes) {
    return InvalidArgument(what + ": initial state has " + std::to_string(s.initial.size()) + " bytes, dims " +
                           ShapeToString(s.dims) + " need " + std::to_string(*bytes));
  }
  return Status::Ok();
}

}  // namespace

const char* ControlKindName(ControlInput::Kind kind) {
  switch (kind) {
    case ControlInput::Kind::kStart: return "CONTROL_SEQUENCE_START";
    case ControlInput::Kind::kEnd: return "CONTROL_SEQUENCE_END";
    case ControlInput::Kind::kReady: return "CONTROL_SEQUENCE_READY";
    case ControlInput::Kind::kCorrelationId: return "CONTROL_SEQUENCE_CORRID";
  }
  return "CONTROL_SEQUENCE_?";
}

const ControlInput* SequencePolicy::Find(ControlInput::Kind kind) const {
  for (const ControlInput& c : controls)
    if (c.kind == kind) return &c;
  return nullptr;
}

Status SequenceBatcherOptions::Validate() const {
  ORTSERVE_RETURN_IF_ERROR(batcher.Validate());
  const std::string label = Label();
  const SequencePolicy& s = sequence;
  if (s.slots_per_instance < 1) return InvalidArgument(label + ": slots_per_instance must be at least 1");
  if (s.strategy == SequencePolicy::Strategy::kDirect && batcher.batching.max_batch_size > 0 &&
      s.slots_per_instance > static_cast<uint32_t>(batcher.batching.max_batch_size)) {
    return InvalidArgument(label + ": the direct strategy's " + std::to_string(s.slots_per_instance) +
                           " slots exceed max_batch_size " + std::to_string(batcher.batching.max_batch_size));
  }
  if (s.minimum_slot_utilization < 0.0f || s.minimum_slot_utilization > 1.0f) {
    return InvalidArgument(label + ": minimum_slot_utilization must be within [0, 1]");
  }
  if (s.max_sequence_idle_us == 0) return InvalidArgument(label + ": max_sequence_idle_us must be positive");
  std::set<std::string> names;
  std::set<ControlInput::Kind> kinds;
  for (const ControlInput& c : s.controls) {
    ORTSERVE_RETURN_IF_ERROR(CheckControl(label, c));
    if (!kinds.insert(c.kind).second) {
      return InvalidArgument(label + ": more than one control input of kind " + ControlKindName(c.kind));
    }
    if (!names.insert(c.name).second) return InvalidArgument(label + ": input '" + c.name + "' is fed twice");
  }
  std::set<std::string> outputs;
  for (const StateTensor& st : s.states) {
    ORTSERVE_RETURN_IF_ERROR(CheckState(label, st));
    if (!names.insert(st.input_name).second) {
      return InvalidArgument(label + ": input '" + st.input_name + "' is fed twice");
    }
    if (!outputs.insert(st.output_name).second) {
      return InvalidArgument(label + ": output '" + st.output_name + "' is the state of two inputs");
    }
  }
  return Status::Ok();
}

}  // namespace ortserve
