#pragma once
// The one ONNX Runtime environment of the process (DESIGN: no globals except
// the ORT env and the logger). Internal to the runtime layer.
#include <onnxruntime_cxx_api.h>

namespace ortserve {

// Created on first use, thread-safe. ORT's own log messages (warning and
// above) go to spdlog. Sessions keep their own intra/inter-op thread pools;
// the env's global pools are never enabled, so each instance's thread budget
// is exactly what its RuntimeOptions say.
// Throws Ort::Exception if ORT cannot create the env (callers are at the
// runtime boundary and convert it into a Status).
Ort::Env& SharedOrtEnv();

}  // namespace ortserve
