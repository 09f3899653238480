#pragma once
// The one ONNX Runtime environment of the process (docs/design.md: no globals
// except the ORT env and the logger). Internal to the runtime layer.
#include <onnxruntime_cxx_api.h>

namespace ortserve {

// Created on first use, thread-safe. ORT's own log messages (warning and
// above) go to spdlog. When ConfigureSharedThreadPool() ran first, the env
// owns ORT's global intra-op pool (sessions created with
// RuntimeOptions::shared_thread_pool run on it); otherwise every session keeps
// its own pools.
// Throws Ort::Exception if ORT cannot create the env (callers are at the
// runtime boundary and convert it into a Status).
Ort::Env& SharedOrtEnv();

// True when the env was created with the global pool.
bool SharedOrtEnvHasThreadPool();

}  // namespace ortserve
