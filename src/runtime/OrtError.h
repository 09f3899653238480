#pragma once
// Converts ORT exceptions into Status values at the runtime boundary: no
// exception leaves the runtime layer.
#include <onnxruntime_cxx_api.h>

#include <exception>
#include <string_view>

#include "core/Status.h"

namespace ortserve {

// `context` says what was being done ("loading model 'm.onnx'"); the message
// is "<context>: <ORT message>", the code follows the ORT error code.
Status StatusFromOrt(const Ort::Exception& e, std::string_view context);
// For anything else that escaped (std::bad_alloc, ...).
Status StatusFromException(const std::exception& e, std::string_view context);

}  // namespace ortserve
