#include "serving/ShapeBuckets.h"

#include <algorithm>
#include <cstring>

namespace ortserve {
namespace {

// Product of dims [from, to) of `shape`.
uint64_t DimsProduct(const Shape& shape, size_t from, size_t to) {
  uint64_t n = 1;
  for (size_t d = from; d < to; ++d) n *= static_cast<uint64_t>(shape[d]);
  return n;
}

}  // namespace

Result<std::optional<ShapeBuckets>> ShapeBuckets::FromConfig(const inference::ModelConfig& config) {
  auto parsed = ShapeBucketConfig::FromConfig(config);
  if (!parsed.ok()) return parsed.status();
  if (!parsed.value()) return std::optional<ShapeBuckets>();
  return std::optional<ShapeBuckets>(ShapeBuckets(std::move(*parsed.value())));
}

Status ShapeBuckets::Pad(InferenceRequest* request) const {
  // Validation checked each input's rank against the config, so the axis exists.
  const Tensor* first = nullptr;
  for (const Tensor& t : request->inputs) {
    if (config_.FindPadded(t.name) == nullptr) continue;
    if (first == nullptr) {
      first = &t;
    } else if (t.shape[config_.axis] != first->shape[config_.axis]) {
      return InvalidArgument("inputs '" + first->name + "' and '" + t.name + "' of model '" + config_.model +
                             "' differ in length along the bucketed dim " + std::to_string(config_.axis) + ": " +
                             std::to_string(first->shape[config_.axis]) + " and " + std::to_string(t.shape[config_.axis]));
    }
  }
  if (first == nullptr) return Status::Ok();  // only optional padded inputs, none sent
  const int64_t length = first->shape[config_.axis];
  const std::optional<int64_t> bucket = config_.BucketFor(length);
  if (!bucket) {
    if (config_.overflow == ShapeBucketConfig::Overflow::kAlone) return Status::Ok();
    return InvalidArgument("input '" + first->name + "' for model '" + config_.model + "': length " +
                           std::to_string(length) + " (dim " + std::to_string(config_.axis) + " of shape " +
                           ShapeToString(first->shape) + ") is over the largest shape bucket " +
                           std::to_string(config_.sizes.back()) + " (" + kBucketOverflowParameter + ": reject)");
  }
  if (*bucket == length) return Status::Ok();
  for (Tensor& t : request->inputs) {
    if (const ShapeBucketConfig::PaddedInput* p = config_.FindPadded(t.name)) t = PadTensor(t, config_.axis, *bucket, p->pad);
  }
  request->unpadded_length = length;
  return Status::Ok();
}

Status ShapeBuckets::Crop(const InferenceRequest& request, InferenceResponse* response) const {
  if (request.unpadded_length < 0) return Status::Ok();
  const std::optional<int64_t> bucket = config_.BucketFor(request.unpadded_length);
  for (Tensor& t : response->outputs) {
    if (!config_.IsCropped(t.name)) continue;
    if (!bucket || t.shape.size() <= config_.axis || t.shape[config_.axis] != *bucket) {
      return Internal("output '" + t.name + "' of model '" + config_.model + "' has shape " + ShapeToString(t.shape) +
                      ": expected the bucket " + (bucket ? std::to_string(*bucket) : std::string("?")) +
                      " along dim " + std::to_string(config_.axis) + " to crop it to " +
                      std::to_string(request.unpadded_length));
    }
    t = CropTensor(t, config_.axis, request.unpadded_length);
  }
  return Status::Ok();
}

Tensor ShapeBuckets::PadTensor(const Tensor& t, size_t axis, int64_t target, const std::vector<std::byte>& pad) {
  const int64_t length = t.shape[axis];
  if (length == target) return t;
  const size_t element = pad.size();
  const uint64_t outer = DimsProduct(t.shape, 0, axis);
  const uint64_t inner = DimsProduct(t.shape, axis + 1, t.shape.size()) * element;
  const size_t row_in = static_cast<size_t>(length) * inner;
  const size_t row_out = static_cast<size_t>(target) * inner;
  std::vector<std::byte> out(outer * row_out);  // zeroed: a zero pad needs no fill
  const bool zero_pad = std::all_of(pad.begin(), pad.end(), [](std::byte b) { return b == std::byte{0}; });
  for (uint64_t r = 0; r < outer; ++r) {
    std::byte* row = out.data() + r * row_out;
    if (row_in > 0) std::memcpy(row, t.data.data() + r * row_in, row_in);
    if (zero_pad) continue;
    for (size_t at = row_in; at < row_out; at += element) std::memcpy(row + at, pad.data(), element);
  }
  Tensor padded;
  padded.name = t.name;
  padded.dtype = t.dtype;
  padded.shape = t.shape;
  padded.shape[axis] = target;
  padded.data = TensorData::FromVector(std::move(out));
  return padded;
}

Tensor ShapeBuckets::CropTensor(const Tensor& t, size_t axis, int64_t length) {
  const uint64_t outer = DimsProduct(t.shape, 0, axis);
  const uint64_t inner = DimsProduct(t.shape, axis + 1, t.shape.size()) * DataTypeSize(t.dtype);
  const size_t row_in = static_cast<size_t>(t.shape[axis]) * inner;
  const size_t row_out = static_cast<size_t>(length) * inner;
  Tensor cropped;
  cropped.name = t.name;
  cropped.dtype = t.dtype;
  cropped.shape = t.shape;
  cropped.shape[axis] = length;
  if (outer == 1) {
    cropped.data = t.data.Slice(0, row_out);  // the prefix: no copy
    return cropped;
  }
  std::vector<std::byte> out(outer * row_out);
  for (uint64_t r = 0; r < outer; ++r) {
    if (row_out > 0) std::memcpy(out.data() + r * row_out, t.data.data() + r * row_in, row_out);
  }
  cropped.data = TensorData::FromVector(std::move(out));
  return cropped;
}

}  // namespace ortserve
