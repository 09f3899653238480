#pragma once
// Factory functions over ONNX Runtime. This header exposes no ORT types: the
// ORT session lives behind ModelInstance.
#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "runtime/ModelInstance.h"
#include "runtime/ModelSignature.h"
#include "runtime/RuntimeOptions.h"

namespace ortserve {

// Reads names, element types and shapes of a model's inputs and outputs (for
// config auto-complete and validation). Fails with the ORT message for a
// corrupt file or unsupported operator/type. `op_libraries` are registered
// first (OpLibraries.h), for models that use custom operators.
Result<ModelSignature> InspectModel(const std::string& model_path,
                                    const std::vector<std::string>& op_libraries = {});

// Creates one instance (its own ORT session) with the given options. Providers
// are applied strictly in order (see RuntimeOptions::allow_fallback); the log
// names the providers the session really uses.
Result<std::unique_ptr<ModelInstance>> CreateOrtModelInstance(const RuntimeOptions& options);

// One per model version and device: the CPU instances created with it
// (RuntimeOptions::shared_weights) keep one copy of their pre-packed weights.
// Throws Ort::Exception only if ORT cannot allocate the container.
std::shared_ptr<SharedWeights> CreateSharedWeights();
// Once every instance holding `weights` is created: the raw weights leave
// the process's resident set (the page cache keeps them; the pre-packed
// copies are what runs read).
void ReleaseSharedWeightPages(SharedWeights& weights);

// Makes the process's ORT env own one global intra-op pool of `threads`
// (threads - 1 pool threads named ort-pool-N, plus the thread that calls
// Run), which sessions with RuntimeOptions::shared_thread_pool run on;
// 0: none. Call before the first instance or inspection creates the env;
// afterwards only the same setting succeeds (a different one fails naming
// the pool that exists, and sessions then fall back to pools of their own).
Status ConfigureSharedThreadPool(int threads);

// "1.29.0"
std::string OrtVersion();
// Providers this ORT build offers ("CPUExecutionProvider", ...).
std::vector<std::string> AvailableExecutionProviders();

}  // namespace ortserve
