#pragma once
// What the CPU instances of one model version share (RuntimeOptions::
// shared_weights): the model's inline initializers, mapped once from its
// file and added to each session as ORT shared initializers, and ORT's
// container of pre-packed weights, which keeps one pre-packed copy of a
// shared initializer for every session created with it. Internal to the
// runtime layer; each instance holds this object, so it outlives the
// sessions that point into it.
#include <onnxruntime_cxx_api.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/MappedInitializers.h"

namespace ortserve {

class SharedWeights {
 public:
  Ort::PrepackedWeightsContainer container;

  // The initializers of `model_path` (the model, or its cached optimized
  // graph), mapped on first use; null when the file cannot be read that
  // way (warned once, naming `label`). Thread-safe.
  const MappedInitializers* InitializersFor(const std::string& model_path, const std::string& label);
  // MappedInitializers::ReleaseResidentPages for every mapped file.
  void ReleaseResidentPages();

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<MappedInitializers>> mapped_;  // null: not mappable
};

}  // namespace ortserve
