#include "runtime/OrtSessionFactory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "core/Text.h"
#include "runtime/ExecutionProviders.h"
#include "runtime/OpLibraries.h"
#include "runtime/OrtEnvironment.h"
#include "runtime/OrtError.h"

namespace ortserve {
namespace {

::GraphOptimizationLevel OrtGraphLevel(GraphOptimizationLevel level) {
  switch (level) {
    case GraphOptimizationLevel::kDisabled: return ORT_DISABLE_ALL;
    case GraphOptimizationLevel::kBasic: return ORT_ENABLE_BASIC;
    case GraphOptimizationLevel::kExtended: return ORT_ENABLE_EXTENDED;
    case GraphOptimizationLevel::kAll: return ORT_ENABLE_ALL;
  }
  return ORT_ENABLE_ALL;
}

const char* GraphLevelName(GraphOptimizationLevel level) {
  switch (level) {
    case GraphOptimizationLevel::kDisabled: return "disabled";
    case GraphOptimizationLevel::kBasic: return "basic";
    case GraphOptimizationLevel::kExtended: return "extended";
    case GraphOptimizationLevel::kAll: return "all";
  }
  return "all";
}

// Everything but the execution providers. May throw Ort::Exception.
Ort::SessionOptions BaseSessionOptions(const RuntimeOptions& options) {
  Ort::SessionOptions session;
  session.SetLogId(options.label.c_str());
  // Per-session pools (the env has no global pools): the instance count times
  // these numbers is the model's whole thread budget.
  session.SetIntraOpNumThreads(options.intra_op_threads);
  session.SetInterOpNumThreads(options.inter_op_threads);
  const char* spin = options.allow_spinning ? "1" : "0";
  session.AddConfigEntry("session.intra_op.allow_spinning", spin);
  session.AddConfigEntry("session.inter_op.allow_spinning", spin);
  session.SetExecutionMode(options.execution_mode == ExecutionMode::kParallel ? ORT_PARALLEL
                                                                              : ORT_SEQUENTIAL);
  if (options.enable_mem_arena)
    session.EnableCpuMemArena();
  else
    session.DisableCpuMemArena();
  if (options.enable_mem_pattern)
    session.EnableMemPattern();
  else
    session.DisableMemPattern();
  session.SetGraphOptimizationLevel(OrtGraphLevel(options.graph_optimization_level));
  return session;
}

bool IsCpu(const std::string& name) {
  return name.size() == 3 && std::equal(name.begin(), name.end(), "cpu", [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

Result<LoadedSession> CreateWithProviders(const RuntimeOptions& options, bool cpu_only) {
  Ort::SessionOptions session_options = BaseSessionOptions(options);
  ORTSERVE_RETURN_IF_ERROR(RegisterOpLibraries(options.op_libraries, session_options));
  std::vector<std::string> providers{"CPUExecutionProvider"};
  if (!cpu_only) {
    auto appended = AppendExecutionProviders(options, session_options);
    if (!appended.ok()) return appended.status();
    providers = std::move(appended).value();
  }
  LoadedSession result;
  result.session = Ort::Session(SharedOrtEnv(), options.model_path.c_str(), session_options);
  result.providers = std::move(providers);
  return result;
}

}  // namespace

std::string DescribeSession(const RuntimeOptions& options, const std::vector<std::string>& providers) {
  return fmt::format(
      "providers [{}], intra_op_threads {}, inter_op_threads {}, spinning {}, execution {}, "
      "mem_arena {}, mem_pattern {}, graph_optimization {}",
      Join(providers), options.intra_op_threads, options.inter_op_threads,
      options.allow_spinning ? "on" : "off",
      options.execution_mode == ExecutionMode::kParallel ? "parallel" : "sequential",
      options.enable_mem_arena ? "on" : "off", options.enable_mem_pattern ? "on" : "off",
      GraphLevelName(options.graph_optimization_level)) +
         (options.op_libraries.empty() ? "" : fmt::format(", op libraries [{}]", Join(options.op_libraries)));
}

Result<LoadedSession> CreateOrtSession(const RuntimeOptions& options) {
  const std::string context =
      "loading model '" + options.label + "' from '" + options.model_path + "'";
  if (options.intra_op_threads < 0 || options.inter_op_threads < 0) {
    return InvalidArgument(context +
                           ": thread counts must be >= 0 (0 = ONNX Runtime default), got intra_op " +
                           std::to_string(options.intra_op_threads) + ", inter_op " +
                           std::to_string(options.inter_op_threads));
  }
  Result<LoadedSession> created = Status(StatusCode::kInternal, "not created");
  try {
    created = CreateWithProviders(options, /*cpu_only=*/false);
  } catch (const Ort::Exception& e) {
    created = StatusFromOrt(e, context);
  } catch (const std::exception& e) {
    created = StatusFromException(e, context);
  }
  // A GPU provider can also fail while the session is built (TensorRT engine
  // build, CUDA out of memory). With fallback allowed, try once on CPU alone
  // and say so loudly; a model that fails on CPU too reports the CPU error.
  const bool has_gpu_provider = std::any_of(
      options.execution_providers.begin(), options.execution_providers.end(),
      [](const ExecutionProviderOptions& p) { return !IsCpu(p.name); });
  if (!created.ok() && options.allow_fallback && has_gpu_provider &&
      created.status().code() != StatusCode::kInvalidArgument) {
    spdlog::warn("{}: EXECUTION PROVIDER FALLBACK: session creation failed ({}); retrying on "
                 "CPUExecutionProvider only",
                 options.label, created.status().message());
    try {
      created = CreateWithProviders(options, /*cpu_only=*/true);
    } catch (const Ort::Exception& e) {
      created = StatusFromOrt(e, context);
    } catch (const std::exception& e) {
      created = StatusFromException(e, context);
    }
  }
  if (!created.ok()) return created.status();
  return created;
}

}  // namespace ortserve
