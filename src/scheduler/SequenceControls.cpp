#include "scheduler/SequenceControls.h"

#include <cstring>

namespace ortserve {
namespace {

Shape RowShape(bool batching) { return batching ? Shape{1, 1} : Shape{1}; }

Tensor Row(const std::string& name, DataType dtype, bool batching, const std::byte* bytes, size_t size) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.shape = RowShape(batching);
  t.data = TensorData::Copy(bytes, size);
  return t;
}

bool Flag(const SequenceControls::Flags& flags, ControlInput::Kind kind) {
  switch (kind) {
    case ControlInput::Kind::kStart: return flags.ready && flags.start;
    case ControlInput::Kind::kEnd: return flags.ready && flags.end;
    case ControlInput::Kind::kReady: return flags.ready;
    case ControlInput::Kind::kCorrelationId: break;
  }
  return false;
}

}  // namespace

SequenceControls::SequenceControls(const SequencePolicy& policy, bool batching) : batching_(batching) {
  for (const ControlInput& c : policy.controls) {
    if (c.kind == ControlInput::Kind::kCorrelationId) {
      has_correlation_id_ = true;
      correlation_name_ = c.name;
      correlation_dtype_ = c.dtype;
      continue;
    }
    const size_t size = DataTypeSize(c.dtype);
    booleans_.push_back({c.kind, Row(c.name, c.dtype, batching, c.false_value.data(), size),
                         Row(c.name, c.dtype, batching, c.true_value.data(), size)});
  }
}

void SequenceControls::Append(Flags flags, const SequenceParameters& id, std::vector<Tensor>* inputs) const {
  for (const Boolean& b : booleans_) inputs->push_back(Flag(flags, b.kind) ? b.true_row : b.false_row);
  if (has_correlation_id_) inputs->push_back(CorrelationRow(id, flags.ready));
}

Tensor SequenceControls::CorrelationRow(const SequenceParameters& id, bool ready) const {
  if (correlation_dtype_ == DataType::kBytes) {
    const std::string value = ready ? id.string_id : std::string();
    std::vector<std::byte> bytes(4 + value.size());
    const auto length = static_cast<uint32_t>(value.size());
    std::memcpy(bytes.data(), &length, 4);  // little-endian host, as core/Tensor.cpp
    if (!value.empty()) std::memcpy(bytes.data() + 4, value.data(), value.size());
    Tensor t;
    t.name = correlation_name_;
    t.dtype = DataType::kBytes;
    t.shape = RowShape(batching_);
    t.data = TensorData::FromVector(std::move(bytes));
    return t;
  }
  // The id's low bytes, as Triton copies a uint64 into a narrower type.
  const uint64_t value = ready ? id.id : 0;
  return Row(correlation_name_, correlation_dtype_, batching_, reinterpret_cast<const std::byte*>(&value),
             DataTypeSize(correlation_dtype_));
}

Tensor SequenceControls::Repeat(const Tensor& like, const std::byte* element, size_t element_size,
                                uint64_t rows) const {
  std::vector<std::byte> bytes(element_size * rows);
  for (uint64_t r = 0; r < rows; ++r) std::memcpy(bytes.data() + r * element_size, element, element_size);
  Tensor t;
  t.name = like.name;
  t.dtype = like.dtype;
  t.shape = batching_ ? Shape{static_cast<int64_t>(rows), 1} : Shape{static_cast<int64_t>(rows)};
  t.data = TensorData::FromVector(std::move(bytes));
  return t;
}

std::vector<Tensor> SequenceControls::ForRows(Flags flags, uint64_t rows) const {
  std::vector<Tensor> out;
  for (const Boolean& b : booleans_) {
    const Tensor& row = Flag(flags, b.kind) ? b.true_row : b.false_row;
    out.push_back(Repeat(row, row.data.data(), row.data.size(), rows));
  }
  if (has_correlation_id_) {
    const Tensor row = CorrelationRow(SequenceParameters{}, /*ready=*/false);
    out.push_back(Repeat(row, row.data.data(), row.data.size(), rows));
  }
  return out;
}

Status SequenceControls::CheckCorrelationId(const SequenceParameters& id, const std::string& model_name) const {
  if (!has_correlation_id_) return Status::Ok();
  const bool string_id = !id.string_id.empty();
  if (string_id == (correlation_dtype_ == DataType::kBytes)) return Status::Ok();
  return InvalidArgument("sequence batching control 'CORRID' data-type is '" +
                         std::string(string_id ? "BYTES" : "UINT64") + "', but model '" + model_name +
                         "' expects '" + std::string(DataTypeName(correlation_dtype_)) + "': the request's sequence_id " +
                         (string_id ? "is a string, the model's CORRID input '" + correlation_name_ + "' a number"
                                    : "is a number, the model's CORRID input '" + correlation_name_ + "' a string"));
}

}  // namespace ortserve
