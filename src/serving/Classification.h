#pragma once
// Triton's classification extension: an output requested with
// "classification": N comes back as its top N entries per batch row, a BYTES
// tensor of "value:index" strings, or "value:index:label" where the output's
// config names a label_filename. The output's labels are read once, when the
// model loads; classifying is part of shaping the response
// (serving/ResponseShaper.h).
//
// As Triton: the value is printed with std::to_string (six decimals for FP32
// and FP64, plain integers otherwise); the shape is [batch, min(N, row)] for
// a model that batches and [min(N, row)] otherwise, where `row` is the element
// count of one batch row (every non-batch dim, flattened); a row may hold at
// most kMaxClassificationElements. Where Triton leaves the order of equal
// values unspecified, ortserve puts the lower index first, and NaN last.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/DataType.h"
#include "core/Status.h"
#include "core/Tensor.h"
#include "model_config.pb.h"

namespace ortserve {

// Triton's bound on the elements of one classified row.
inline constexpr uint64_t kMaxClassificationElements = 1'000'000;

// The datatypes Triton classifies: the fixed-size integers, FP32 and FP64
// (not BOOL, FP16, BF16 or BYTES).
bool IsClassifiable(DataType type);
// kInvalidArgument naming the output (`what`: "output 'prob'", with its model
// where known) and its datatype when that is not classifiable.
Status CheckClassifiable(const std::string& what, DataType type);

// The labels of every output whose config names a label_filename, one per
// line of that file (line i labels class index i; an empty line, or an index
// past the last line, has no label).
class OutputLabels {
 public:
  // Reads each label_filename relative to `model_dir` (the model's folder,
  // which holds config.pbtxt). Fails naming the output and the file when it
  // cannot be read (kUnavailable) or lies outside `model_dir`
  // (kInvalidArgument).
  static Result<OutputLabels> Read(const inference::ModelConfig& config, const std::filesystem::path& model_dir);

  // The output's labels; null when its config names no label file.
  const std::vector<std::string>* Find(const std::string& output) const;
  bool empty() const { return by_output_.empty(); }

 private:
  std::map<std::string, std::vector<std::string>> by_output_;
};

// Replaces `tensor` with its top-`count` classification (count > 0).
// `batched`: the first dim is the batch (the model's max_batch_size > 0).
// `labels` may be null. kInvalidArgument naming the output for a datatype
// that is not classifiable or a row above kMaxClassificationElements;
// kInternal when the data does not match the shape.
Status Classify(uint64_t count, bool batched, const std::vector<std::string>* labels, Tensor* tensor);

}  // namespace ortserve
