#include "runtime/OrtError.h"

#include <string>

namespace ortserve {
namespace {

StatusCode CodeFromOrt(OrtErrorCode code) {
  switch (code) {
    case ORT_INVALID_ARGUMENT:
    case ORT_NO_SUCHFILE:
    case ORT_NO_MODEL:
    case ORT_INVALID_PROTOBUF:
    case ORT_INVALID_GRAPH:
      return StatusCode::kInvalidArgument;
    case ORT_NOT_IMPLEMENTED:
      return StatusCode::kUnsupported;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

Status StatusFromOrt(const Ort::Exception& e, std::string_view context) {
  return Status(CodeFromOrt(e.GetOrtErrorCode()), std::string(context) + ": " + e.what());
}

Status StatusFromException(const std::exception& e, std::string_view context) {
  return Internal(std::string(context) + ": " + e.what());
}

}  // namespace ortserve
