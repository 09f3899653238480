#pragma once
// Shape buckets at request time: requests of a model with a variable
// dimension (a text model's sequence length) padded at admission to the
// smallest configured length that fits, so that the dynamic batcher's
// identical-shape batching groups every request of one bucket, and the
// outputs cropped back to the request's own length before they are
// answered. The buckets come from the config (config/ShapeBucketConfig.h).
//
// A request is padded with one allocation and copy per padded input; a model
// without `shape_buckets` has no ShapeBuckets and pays nothing.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/ShapeBucketConfig.h"
#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "core/Tensor.h"
#include "model_config.pb.h"

namespace ortserve {

class ShapeBuckets {
 public:
  using Overflow = ShapeBucketConfig::Overflow;
  using PaddedInput = ShapeBucketConfig::PaddedInput;

  explicit ShapeBuckets(ShapeBucketConfig config) : config_(std::move(config)) {}
  // ShapeBucketConfig::FromConfig, ready to pad and crop.
  static Result<std::optional<ShapeBuckets>> FromConfig(const inference::ModelConfig& config);

  const ShapeBucketConfig& config() const { return config_; }
  const std::vector<int64_t>& sizes() const { return config_.sizes; }
  size_t axis() const { return config_.axis; }
  const PaddedInput* FindPadded(const std::string& name) const { return config_.FindPadded(name); }
  std::optional<int64_t> BucketFor(int64_t length) const { return config_.BucketFor(length); }

  // Admission, after validation: pads the request's padded inputs (which
  // must agree on their length along the axis) to their bucket and records
  // the length in `request->unpadded_length`. A request longer than the
  // largest bucket is left as it is (alone) or refused kInvalidArgument
  // naming its length and the largest bucket (reject).
  Status Pad(InferenceRequest* request) const;
  // Completion: crops the response's bucketed outputs back to
  // `request.unpadded_length` (nothing to do when the request was not
  // padded). kInternal when an output's axis is not the request's bucket.
  Status Crop(const InferenceRequest& request, InferenceResponse* response) const;

  // `t` padded with `pad` to `target` along `axis` (`t.shape[axis]` <=
  // `target`); `t` itself when it already has that length. Fixed-size types.
  static Tensor PadTensor(const Tensor& t, size_t axis, int64_t target, const std::vector<std::byte>& pad);
  // `t` cut to its first `length` rows along `axis`: a view when nothing
  // precedes the axis but size-1 dims, otherwise one copy.
  static Tensor CropTensor(const Tensor& t, size_t axis, int64_t length);

 private:
  ShapeBucketConfig config_;
};

}  // namespace ortserve
