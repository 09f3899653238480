#include "scheduler/SequenceStates.h"

#include <cstring>

namespace ortserve {

SequenceStates::SequenceStates(const SequencePolicy& policy, bool batching, uint32_t slots,
                               std::atomic<uint64_t>* bytes_held)
    : held_(slots), bytes_held_(bytes_held) {
  for (const StateTensor& state : policy.states) {
    Spec spec;
    spec.tensor = state;
    spec.row_shape = state.dims;
    if (batching) spec.row_shape.insert(spec.row_shape.begin(), 1);
    spec.bytes = static_cast<size_t>(FixedByteSize(state.dtype, state.dims).value_or(0));  // validated
    spec.initial = state.initial.size() == spec.bytes
                       ? state.initial
                       : TensorData::FromVector(std::vector<std::byte>(spec.bytes));  // zeros
    bytes_per_slot_ += spec.bytes;
    specs_.push_back(std::move(spec));
  }
  for (Held& h : held_) {
    h.current.resize(specs_.size());
    h.spare.resize(specs_.size());
  }
}

SequenceStates::~SequenceStates() { ReleaseAll(); }

void SequenceStates::ReleaseAll() {
  for (uint32_t slot = 0; slot < held_.size(); ++slot) Release(slot);
}

Tensor SequenceStates::RowTensor(const Spec& spec, const TensorData& data) const {
  Tensor t;
  t.name = spec.tensor.input_name;
  t.dtype = spec.tensor.dtype;
  t.shape = spec.row_shape;
  t.data = data;
  return t;
}

void SequenceStates::Append(uint32_t slot, bool start, std::vector<Tensor>* inputs) const {
  const Held& h = held_[slot];
  for (size_t i = 0; i < specs_.size(); ++i) {
    const Spec& spec = specs_[i];
    if (start || !h.valid) {
      inputs->push_back(RowTensor(spec, spec.initial));
    } else {
      const Buffer& buffer = h.current[i];
      inputs->push_back(RowTensor(spec, TensorData(buffer, buffer->data(), buffer->size())));
    }
  }
}

void SequenceStates::AppendInitial(std::vector<Tensor>* inputs) const {
  for (const Spec& spec : specs_) inputs->push_back(RowTensor(spec, spec.initial));
}

Status SequenceStates::CopyOut(const Spec& spec, const std::vector<Tensor>& outputs, Buffer* into) const {
  const Tensor* out = FindTensor(outputs, spec.tensor.output_name);
  if (out == nullptr) {
    return Internal("the model produced no state output '" + spec.tensor.output_name + "'");
  }
  if (out->dtype != spec.tensor.dtype || out->shape != spec.row_shape || out->data.size() != spec.bytes) {
    return Internal("state output '" + spec.tensor.output_name + "' is " + std::string(DataTypeName(out->dtype)) +
                    " " + ShapeToString(out->shape) + ", the state is " +
                    std::string(DataTypeName(spec.tensor.dtype)) + " " + ShapeToString(spec.row_shape));
  }
  // Reused once nothing else (the request that read it) holds it.
  if (!*into || into->use_count() != 1) *into = std::make_shared<std::vector<std::byte>>();
  (*into)->resize(spec.bytes);
  if (spec.bytes) std::memcpy((*into)->data(), out->data.data(), spec.bytes);
  return Status::Ok();
}

Status SequenceStates::Keep(uint32_t slot, const std::vector<Tensor>& outputs) {
  Held& h = held_[slot];
  for (size_t i = 0; i < specs_.size(); ++i) {
    Status copied = CopyOut(specs_[i], outputs, &h.spare[i]);
    if (!copied.ok()) {
      Release(slot);
      return copied;
    }
  }
  std::swap(h.current, h.spare);
  if (!h.valid && !specs_.empty()) {
    h.valid = true;
    bytes_held_->fetch_add(bytes_per_slot_, std::memory_order_relaxed);
  }
  return Status::Ok();
}

void SequenceStates::Release(uint32_t slot) {
  Held& h = held_[slot];
  if (h.valid) bytes_held_->fetch_sub(bytes_per_slot_, std::memory_order_relaxed);
  h.valid = false;
  for (Buffer& b : h.current) b.reset();
  for (Buffer& b : h.spare) b.reset();
}

std::vector<Tensor> InitialStateRows(const SequencePolicy& policy, bool batching, uint64_t rows) {
  std::vector<Tensor> out;
  for (const StateTensor& state : policy.states) {
    const size_t bytes = static_cast<size_t>(FixedByteSize(state.dtype, state.dims).value_or(0));
    std::vector<std::byte> data(bytes * rows);  // zeros unless an initial state is given
    if (state.initial.size() == bytes && bytes > 0) {
      for (uint64_t r = 0; r < rows; ++r) std::memcpy(data.data() + r * bytes, state.initial.data(), bytes);
    }
    Tensor t;
    t.name = state.input_name;
    t.dtype = state.dtype;
    t.shape = state.dims;
    if (batching) t.shape.insert(t.shape.begin(), static_cast<int64_t>(rows));
    t.data = TensorData::FromVector(std::move(data));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ortserve
