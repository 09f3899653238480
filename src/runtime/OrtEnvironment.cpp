#include "runtime/OrtEnvironment.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/ThreadName.h"
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

// The global pool's size, set by ConfigureSharedThreadPool before the env
// exists; 0: no global pool.
std::mutex env_mutex;
int global_pool_threads = 0;
bool env_created = false;
bool env_has_pool = false;

// ORT's global pool creates its threads through these hooks, so that they
// carry a name of their own (ort-pool-N) instead of inheriting whichever
// thread first touched the env.
OrtCustomThreadHandle CreatePoolThread(void* /*options*/, OrtThreadWorkerFn work, void* param) {
  static std::atomic<int> next_index{0};
  const int index = next_index++;
  auto* thread = new std::thread([work, param, index] {
    SetCurrentThreadName("ort-pool-" + std::to_string(index));
    work(param);
  });
  return reinterpret_cast<OrtCustomThreadHandle>(thread);
}

void JoinPoolThread(OrtCustomThreadHandle handle) {
  auto* thread = reinterpret_cast<std::thread*>(const_cast<OrtCustomHandleType*>(handle));
  thread->join();
  delete thread;
}

Ort::Env* CreateEnv(int pool_threads) {
  if (pool_threads <= 0) return new Ort::Env(ORT_LOGGING_LEVEL_WARNING, "ortserve", &LogToSpdlog, nullptr);
  Ort::ThreadingOptions threading;
  // The caller of Run computes too, so a pool of N has N-1 threads of its own.
  threading.SetGlobalIntraOpNumThreads(pool_threads);
  // Parallel execution mode asks for a pool of its own (ThreadPlan.h), so
  // the global inter-op pool is never used: size 1 creates no thread.
  threading.SetGlobalInterOpNumThreads(1);
  // docs/decisions.md, "ORT thread spinning off by default".
  threading.SetGlobalSpinControl(0);
  threading.SetGlobalCustomCreateThreadFn(&CreatePoolThread);
  threading.SetGlobalCustomJoinThreadFn(&JoinPoolThread);
  return new Ort::Env(threading, &LogToSpdlog, nullptr, ORT_LOGGING_LEVEL_WARNING, "ortserve");
}

}  // namespace

Status ConfigureSharedThreadPool(int threads) {
  std::lock_guard<std::mutex> lock(env_mutex);
  if (env_created) {
    if (threads == global_pool_threads) return Status::Ok();
    return Status(StatusCode::kInternal,
                  "the ONNX Runtime environment already exists with " +
                      (global_pool_threads > 0 ? "a shared pool of " + std::to_string(global_pool_threads)
                                               : std::string("no shared pool")) +
                      "; sessions keep their own pools");
  }
  global_pool_threads = threads > 0 ? threads : 0;
  return Status::Ok();
}

Ort::Env& SharedOrtEnv() {
  // Deliberately never destroyed: model instances owned by other statics may
  // be released during static destruction, after a function-local Env would
  // already be gone. If the constructor throws, the next call tries again.
  static Ort::Env* env = [] {
    std::lock_guard<std::mutex> lock(env_mutex);
    auto* created = CreateEnv(global_pool_threads);
    env_created = true;
    env_has_pool = global_pool_threads > 0;
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

bool SharedOrtEnvHasThreadPool() {
  SharedOrtEnv();
  std::lock_guard<std::mutex> lock(env_mutex);
  return env_has_pool;
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
