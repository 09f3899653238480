#pragma once
// Reads a session's input/output signature into the ORT-free ModelSignature.
#include <onnxruntime_cxx_api.h>

#include <string_view>

#include "core/Status.h"
#include "runtime/ModelSignature.h"

namespace ortserve {

// Fails (Unsupported) for a non-tensor input/output or an element type KServe
// cannot carry, naming the tensor and its type. `model` names the model in
// messages. May throw Ort::Exception; callers sit at the runtime boundary.
Result<ModelSignature> ReadModelSignature(const Ort::Session& session, std::string_view model);

}  // namespace ortserve
