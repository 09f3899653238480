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

// "1.29.0"
std::string OrtVersion();
// Providers this ORT build offers ("CPUExecutionProvider", ...).
std::vector<std::string> AvailableExecutionProviders();

}  // namespace ortserve
