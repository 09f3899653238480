#include "scheduler/TensorStacker.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

namespace ortserve {

const Tensor* FindInput(const InferenceRequest& request, const std::string& name, size_t hint) {
  if (hint < request.inputs.size() && request.inputs[hint].name == name) return &request.inputs[hint];
  return FindTensor(request.inputs, name);
}

namespace {

bool SameNonBatchDims(const Shape& a, const Shape& b) {
  return a.size() == b.size() && !a.empty() && std::equal(a.begin() + 1, a.end(), b.begin() + 1);
}

// Bytes of `tensor` as its shape says; nullopt when the data disagrees.
std::optional<uint64_t> CheckedByteSize(const Tensor& tensor) {
  if (tensor.dtype == DataType::kBytes) {
    auto elements = CountBytesElements(tensor.data.data(), tensor.data.size());
    auto expected = ElementCount(tensor.shape);
    if (!elements || !expected || *elements != *expected) return std::nullopt;
    return tensor.data.size();
  }
  auto bytes = FixedByteSize(tensor.dtype, tensor.shape);
  if (!bytes || *bytes != tensor.data.size()) return std::nullopt;
  return bytes;
}

uint32_t ReadLength(const std::byte* p) {
  uint32_t len;
  std::memcpy(&len, p, sizeof len);  // little-endian host, as core/Tensor.cpp
  return len;
}

// Byte length of the first `count` BYTES elements at `data`; nullopt past `size`.
std::optional<size_t> BytesPrefixLength(const std::byte* data, size_t size, uint64_t count) {
  size_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (size - pos < 4) return std::nullopt;
    const uint32_t len = ReadLength(data + pos);
    pos += 4;
    if (len > size - pos) return std::nullopt;
    pos += len;
  }
  return pos;
}

Status BadOutput(const Tensor& output, const std::string& why) {
  return Internal("output '" + output.name + "' " + why);
}

}  // namespace

bool CanStack(const InferenceRequest& a, const InferenceRequest& b, const RaggedBatching* ragged) {
  if (a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const Tensor& x = a.inputs[i];
    const Tensor* y = FindInput(b, x.name, i);
    if (!y || x.dtype != y->dtype) return false;
    if (ragged && ragged->IsRagged(x.name)) continue;
    if (!SameNonBatchDims(x.shape, y->shape)) return false;
  }
  return true;
}

Status TensorStacker::Stack(const std::vector<const InferenceRequest*>& requests, std::vector<Tensor>* batched,
                            const RaggedBatching* ragged) {
  batched->clear();
  if (requests.size() == 1) {
    *batched = requests.front()->inputs;  // shares the request's buffers
    if (!ragged) return Status::Ok();
    for (Tensor& input : *batched) {
      if (ragged->IsRagged(input.name)) input.shape = {static_cast<int64_t>(ElementCount(input.shape).value_or(0))};
    }
    return Status::Ok();
  }
  const InferenceRequest& head = *requests.front();
  if (buffers_.size() < head.inputs.size()) buffers_.resize(head.inputs.size());
  for (size_t i = 0; i < head.inputs.size(); ++i) {
    const Tensor& first = head.inputs[i];
    // A ragged input becomes one 1-D tensor of every element of the batch.
    const bool flatten = ragged && ragged->IsRagged(first.name);
    std::vector<const Tensor*> parts;
    parts.reserve(requests.size());
    uint64_t rows = 0;
    uint64_t elements = 0;
    size_t bytes = 0;
    for (const InferenceRequest* request : requests) {
      const Tensor* part = FindInput(*request, first.name, i);
      auto size = part ? CheckedByteSize(*part) : std::nullopt;
      if (!size || part->shape.empty()) {
        return InvalidArgument("input '" + first.name + "' of request '" + request->id +
                               "' cannot be batched: missing, or its data does not match shape " +
                               (part ? ShapeToString(part->shape) : "[]"));
      }
      parts.push_back(part);
      rows += static_cast<uint64_t>(part->shape[0]);
      if (flatten) elements += *ElementCount(part->shape);
      bytes += *size;
    }

    // Reuse last batch's buffer unless the runtime still holds it.
    auto& buffer = buffers_[i];
    if (!buffer || buffer.use_count() != 1) buffer = std::make_shared<std::vector<std::byte>>();
    buffer->resize(bytes);
    size_t offset = 0;
    for (const Tensor* part : parts) {
      // BYTES are length-prefixed elements, so they concatenate like the rest.
      if (part->data.size()) std::memcpy(buffer->data() + offset, part->data.data(), part->data.size());
      offset += part->data.size();
    }

    Tensor stacked;
    stacked.name = first.name;
    stacked.dtype = first.dtype;
    stacked.shape = first.shape;
    stacked.shape[0] = static_cast<int64_t>(rows);
    if (flatten) stacked.shape = {static_cast<int64_t>(elements)};
    stacked.data = TensorData(buffer, buffer->data(), bytes);
    batched->push_back(std::move(stacked));
  }
  return Status::Ok();
}

Status TensorStacker::Split(const std::vector<Tensor>& outputs, const std::vector<uint64_t>& rows,
                            std::vector<std::vector<Tensor>>* parts) {
  uint64_t total = 0;
  for (uint64_t r : rows) total += r;
  parts->assign(rows.size(), {});
  for (auto& p : *parts) p.reserve(outputs.size());

  for (const Tensor& output : outputs) {
    if (output.shape.empty()) return BadOutput(output, "has no batch dimension");
    if (output.shape[0] < 0 || static_cast<uint64_t>(output.shape[0]) != total) {
      return BadOutput(output, "has batch dimension " + std::to_string(output.shape[0]) +
                                   " but the batch holds " + std::to_string(total) + " rows");
    }
    if (!CheckedByteSize(output)) {
      return BadOutput(output, "data (" + std::to_string(output.data.size()) +
                                   " bytes) does not match its shape " +
                                   ShapeToString(output.shape));
    }
    const Shape row_shape(output.shape.begin() + 1, output.shape.end());
    const uint64_t per_row = *ElementCount(row_shape);
    const size_t fixed_row_bytes = DataTypeSize(output.dtype) * per_row;

    size_t offset = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      size_t length;
      if (output.dtype == DataType::kBytes) {
        // Validated above: the walk stays inside the buffer.
        length = *BytesPrefixLength(output.data.data() + offset, output.data.size() - offset,
                                    rows[i] * per_row);
      } else {
        length = fixed_row_bytes * rows[i];
      }
      Tensor part;
      part.name = output.name;
      part.dtype = output.dtype;
      part.shape = output.shape;
      part.shape[0] = static_cast<int64_t>(rows[i]);
      part.data = output.data.Slice(offset, length);
      (*parts)[i].push_back(std::move(part));
      offset += length;
    }
  }
  return Status::Ok();
}

}  // namespace ortserve
