#pragma once
// The initializers stored inline (raw_data) in an ONNX model file, mapped
// read-only from the file and wrapped as Ort::Values over the mapping, for
// ORT's shared initializers (SessionOptions::AddInitializer). Sessions given
// the same values, and the same PrepackedWeightsContainer, keep one copy of
// the pre-packed weights; the raw bytes stay in the page cache, not in each
// session. Internal to the runtime layer.
#include <onnxruntime_cxx_api.h>

#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"

namespace ortserve {

class MappedInitializers {
 public:
  // Maps `model_path` and finds its inline tensors of rank 2 or more and of
  // at least `min_bytes` (smaller ones are not worth sharing; vectors stay
  // with each session, see Map). kInternal when the file cannot be
  // mapped or is not an ONNX model ORT would read either.
  static Result<std::unique_ptr<MappedInitializers>> Map(const std::string& model_path, size_t min_bytes);
  ~MappedInitializers();
  MappedInitializers(const MappedInitializers&) = delete;
  MappedInitializers& operator=(const MappedInitializers&) = delete;

  // Adds every mapped tensor to `options` as a shared initializer.
  void AddTo(Ort::SessionOptions& options) const;
  size_t count() const { return names_.size(); }
  size_t bytes() const { return bytes_; }
  // Drops the mapping's pages from the process's resident set once every
  // session is built: pre-packed kernels no longer read them, and the few
  // that read raw matrices (a Conv, a Gather) fault back in what they read.
  void ReleaseResidentPages() const;

 private:
  MappedInitializers(void* base, size_t size) : base_(base), size_(size) {}

  void* base_;
  size_t size_;
  size_t bytes_ = 0;
  std::vector<std::string> names_;
  std::vector<Ort::Value> values_;
};

}  // namespace ortserve
