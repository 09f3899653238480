#pragma once
// Applies RuntimeOptions::execution_providers to ORT session options, strictly
// in order and never silently (DESIGN: fail, or say loudly what runs).
#include <onnxruntime_cxx_api.h>

#include <string>
#include <vector>

#include "core/Status.h"
#include "runtime/RuntimeOptions.h"

namespace ortserve {

// Appends the requested providers ("cpu", "cuda", "tensorrt") to `session`.
// A provider this ORT build lacks, an unknown name, or one ORT refuses to
// append fails with the reason, unless options.allow_fallback: then it is
// skipped with a warning naming what runs instead. Returns the ORT names of
// the providers really registered, in priority order, always ending with
// "CPUExecutionProvider" (ORT places nodes no listed provider supports on CPU).
// Never throws.
Result<std::vector<std::string>> AppendExecutionProviders(const RuntimeOptions& options,
                                                           Ort::SessionOptions& session);

}  // namespace ortserve
