#include "runtime/OrtEnvironment.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <string>
#include <vector>

#include "runtime/OrtModelInstance.h"

namespace ortserve {
namespace {

spdlog::level::level_enum SpdlogLevel(OrtLoggingLevel severity) {
  switch (severity) {
    case ORT_LOGGING_LEVEL_VERBOSE: return spdlog::level::trace;
    case ORT_LOGGING_LEVEL_INFO: return spdlog::level::debug;  // ORT's info is chatty
    case ORT_LOGGING_LEVEL_WARNING: return spdlog::level::warn;
    case ORT_LOGGING_LEVEL_ERROR: return spdlog::level::err;
    case ORT_LOGGING_LEVEL_FATAL: return spdlog::level::critical;
  }
  return spdlog::level::warn;
}

void ORT_API_CALL LogToSpdlog(void* /*param*/, OrtLoggingLevel severity, const char* category,
                              const char* logid, const char* code_location, const char* message) {
  // ORT may call this from its own threads; spdlog's default logger is thread-safe.
  spdlog::log(SpdlogLevel(severity), "[onnxruntime] {} {} ({}): {}", category ? category : "",
              logid ? logid : "", code_location ? code_location : "", message ? message : "");
}

}  // namespace

Ort::Env& SharedOrtEnv() {
  // Deliberately never destroyed: model instances owned by other statics may
  // be released during static destruction, after a function-local Env would
  // already be gone. If the constructor throws, the next call tries again.
  static Ort::Env* env = [] {
    auto* created = new Ort::Env(ORT_LOGGING_LEVEL_WARNING, "ortserve", &LogToSpdlog, nullptr);
    // A server should not report to Microsoft's telemetry behind its
    // operator's back (ORT's Linux build otherwise keeps a local event
    // database and tries to upload it); main() also sets
    // ORT_DISABLE_TELEMETRY before anything starts, which stops the
    // collector thread itself.
    created->DisableTelemetryEvents();
    return created;
  }();
  return *env;
}

std::string OrtVersion() {
  try {
    return Ort::GetVersionString();
  } catch (const std::exception& e) {
    spdlog::error("cannot read the ONNX Runtime version: {}", e.what());
    return "unknown";
  }
}

std::vector<std::string> AvailableExecutionProviders() {
  try {
    return Ort::GetAvailableProviders();
  } catch (const std::exception& e) {
    spdlog::error("cannot list ONNX Runtime execution providers: {}", e.what());
    return {};
  }
}

}  // namespace ortserve
