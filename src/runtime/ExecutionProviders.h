#pragma once
// Applies RuntimeOptions::execution_providers to ORT session options, strictly
// in order and never silently (docs/design.md: fail, or say loudly what runs).
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

// The directory libonnxruntime.so was loaded from: ORT looks for the GPU
// provider libraries (libonnxruntime_providers_{cuda,tensorrt}.so) there.
std::string OrtLibraryDir();

// Registers libonnxruntime_providers_cuda.so with the shared env as a plugin
// EP library (once per process; later calls return the first result). Needed
// when the core library is a CPU build, and for Env::CopyTensors between host
// and CUDA memory. Returns "" on success, else why not. Never throws.
std::string EnsureCudaPluginRegistered();

}  // namespace ortserve
