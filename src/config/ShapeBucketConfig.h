#pragma once
// Shape buckets as the config states them (serving/ShapeBuckets.h pads and
// crops requests with them). The config, all string values of `parameters`
// (docs/model-config.md, "Shape buckets"):
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
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/DataType.h"
#include "core/Status.h"
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

struct ShapeBucketConfig {
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
  static Result<std::optional<ShapeBucketConfig>> FromConfig(const inference::ModelConfig& config);

  // The padded input named `name`; null when it is not padded.
  const PaddedInput* FindPadded(const std::string& name) const;
  // True when the output `name` is cropped back.
  bool IsCropped(const std::string& name) const;
  // The smallest bucket >= `length`; nullopt when it is over the largest.
  std::optional<int64_t> BucketFor(int64_t length) const;

  std::string model;
  std::vector<int64_t> sizes;  // ascending, each > 0
  size_t axis = 1;             // the bucketed axis of a batched tensor's full shape (bucket_dim + 1)
  std::vector<PaddedInput> inputs;
  std::vector<std::string> outputs;
  Overflow overflow = Overflow::kAlone;
};

}  // namespace ortserve
