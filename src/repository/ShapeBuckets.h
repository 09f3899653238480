#pragma once
// Shape buckets: requests of a model with a variable dimension (a text
// model's sequence length) padded at admission to the smallest configured
// length that fits, so that the dynamic batcher's identical-shape batching
// groups every request of one bucket, and the outputs cropped back to the
// request's own length before they are answered. The config, all string
// values of `parameters` (docs/model-config.md, "Shape buckets"):
//
//   shape_buckets    "16,32,64,128"  the lengths, ascending, each > 0 (turns it on)
//   bucket_dim       "0"             the bucketed dim, counted in the config's
//                                    `dims` (after the batch dim); default 0
//   bucket_pad       "input_ids:0,token_type_ids:0"  the inputs padded and
//                                    their pad value
//   bucket_mask      "attention_mask"  the attention mask: padded with 0, so
//                                    the model ignores the padding
//   bucket_outputs   "last_hidden_state"  the outputs cropped back along the
//                                    same dim (others are answered as computed)
//   bucket_overflow  "alone" | "reject"  a request longer than the largest
//                                    bucket runs at its own shape (default) or
//                                    is refused
//
// A request is padded with one allocation and copy per padded input; a model
// without `shape_buckets` has no ShapeBuckets and pays nothing.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "core/Tensor.h"
#include "model_config.pb.h"

namespace ortserve {

inline constexpr const char* kShapeBucketsParameter = "shape_buckets";
inline constexpr const char* kBucketDimParameter = "bucket_dim";
inline constexpr const char* kBucketPadParameter = "bucket_pad";
inline constexpr const char* kBucketMaskParameter = "bucket_mask";
inline constexpr const char* kBucketOutputsParameter = "bucket_outputs";
inline constexpr const char* kBucketOverflowParameter = "bucket_overflow";

// True for the six keys above.
bool IsShapeBucketParameter(const std::string& key);

class ShapeBuckets {
 public:
  enum class Overflow { kAlone, kReject };
  struct PaddedInput {
    std::string name;
    DataType dtype = DataType::kInvalid;
    std::vector<std::byte> pad;  // one element of the pad value, little endian
  };

  // The buckets `config` asks for; nullopt when it sets no `shape_buckets`.
  // kInvalidArgument naming the parameter for a malformed value, an input or
  // output that is not in the config, one whose bucketed dim is not variable
  // (-1), a BYTES tensor, a tensor with a `reshape`, a pad value its data
  // type cannot hold, or a config without batching or with
  // sequence_batching. The config's inputs and outputs must be final
  // (after auto-complete).
  static Result<std::optional<ShapeBuckets>> FromConfig(const inference::ModelConfig& config);

  const std::vector<int64_t>& sizes() const { return sizes_; }
  // The bucketed axis of a batched tensor's full shape (bucket_dim + 1).
  size_t axis() const { return axis_; }
  // The padded input named `name`; null when it is not padded.
  const PaddedInput* FindPadded(const std::string& name) const;
  // The smallest bucket >= `length`; nullopt when it is over the largest.
  std::optional<int64_t> BucketFor(int64_t length) const;

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
  ShapeBuckets() = default;
  bool IsCropped(const std::string& name) const;

  std::string model_;
  std::vector<int64_t> sizes_;
  size_t axis_ = 1;
  std::vector<PaddedInput> inputs_;
  std::vector<std::string> outputs_;
  Overflow overflow_ = Overflow::kAlone;
};

}  // namespace ortserve
