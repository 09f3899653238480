#pragma once
// Builds an ORT session from RuntimeOptions: thread pool (the env's shared
// pool or the session's own), spinning, execution mode, memory options, graph
// optimisation, execution providers, shared pre-packed weights and the
// optimized-model cache.
#include <onnxruntime_cxx_api.h>

#include <string>
#include <utility>
#include <vector>

#include "core/Status.h"
#include "runtime/ModelInstance.h"
#include "runtime/RuntimeOptions.h"

namespace ortserve {

struct LoadedSession {
  Ort::Session session{nullptr};
  // ORT names of the providers the session was created with, priority order.
  std::vector<std::string> providers;
  // The session runs on the env's global pool.
  bool shared_thread_pool = false;
  ModelCacheUse cache_use = ModelCacheUse::kOff;
};

// Never throws: ORT failures (missing file, corrupt model, provider errors)
// come back as a Status naming the model and carrying ORT's message. Fallback
// (options.allow_fallback) is logged as a warning here.
Result<LoadedSession> CreateOrtSession(const RuntimeOptions& options);

// Each entry given to Ort::SessionOptions::AddConfigEntry alone, without a
// session: ORT checks the values of some keys there (e.g.
// session.graph_optimization_level); others only when a session is created.
// ORT accepts keys it does not know. The error carries ORT's message.
Status CheckSessionConfigEntries(const std::vector<std::pair<std::string, std::string>>& entries);

// One line for the log: providers really used, threads, spinning, ...
std::string DescribeSession(const RuntimeOptions& options, const LoadedSession& session);

}  // namespace ortserve
