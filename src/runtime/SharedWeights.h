#pragma once
// What the CPU instances of one model version share: ORT's container of
// pre-packed weights (MatMul, Gemm, Conv pack their constant weights once and
// every session created with the container reuses that copy; a weight that
// all its kernels pre-packed is then dropped from each session). Internal to
// the runtime layer; the container outlives every session created with it
// because each instance holds this object.
#include <onnxruntime_cxx_api.h>

namespace ortserve {

class SharedWeights {
 public:
  Ort::PrepackedWeightsContainer container;
};

}  // namespace ortserve
