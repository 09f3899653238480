#pragma once
// Custom-operator libraries (Triton's model_operations.op_library_filename,
// ortserve's --op-library): shared objects that export
//   OrtStatus* RegisterCustomOps(OrtSessionOptions*, const OrtApiBase*)
// and add their operator domains to the session options they are given.
#include <onnxruntime_cxx_api.h>

#include <string>
#include <vector>

#include "core/Status.h"

namespace ortserve {

// Registers each library, in order, in `options` through
// OrtApi::RegisterCustomOpsLibrary_V2. The path is handed to dlopen as given,
// as Triton does: a name without '/' is looked up on the library search path,
// a relative path is relative to the server's working directory. ORT keeps
// the library loaded until the last session created from `options` (or
// `options` itself) is released; nothing else outlives the sessions.
//
// Never throws. A library that cannot be opened, is not a shared object,
// lacks RegisterCustomOps or whose registration fails gives kInvalidArgument
// naming the library and the loader's reason (plus how to supply libpython
// when the library is a Python extension module missing its symbols).
Status RegisterOpLibraries(const std::vector<std::string>& libraries,
                           Ort::SessionOptions& options);

}  // namespace ortserve
