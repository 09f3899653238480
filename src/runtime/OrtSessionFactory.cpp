#include "runtime/OrtSessionFactory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "core/Text.h"
#include "runtime/ExecutionProviders.h"
#include "runtime/OpLibraries.h"
#include "runtime/OrtEnvironment.h"
#include "runtime/OrtError.h"
#include "runtime/OptimizedModelCache.h"
#include "runtime/SharedWeights.h"

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
Ort::SessionOptions BaseSessionOptions(const RuntimeOptions& options, bool shared_pool) {
  Ort::SessionOptions session;
  session.SetLogId(options.label.c_str());
  if (shared_pool) {
    // The env's global pool (ConfigureSharedThreadPool): no threads of its own.
    session.DisablePerSessionThreads();
  } else {
    // The session's own pools: the instance count times these numbers is
    // the model's whole thread budget.
    session.SetIntraOpNumThreads(options.intra_op_threads);
    session.SetInterOpNumThreads(options.inter_op_threads);
    const char* spin = options.allow_spinning ? "1" : "0";
    session.AddConfigEntry("session.intra_op.allow_spinning", spin);
    session.AddConfigEntry("session.inter_op.allow_spinning", spin);
  }
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
  for (const auto& [key, value] : options.config_entries) session.AddConfigEntry(key.c_str(), value.c_str());
  return session;
}

bool IsCpu(const std::string& name) {
  return name.size() == 3 && std::equal(name.begin(), name.end(), "cpu", [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

bool IsCpuOnly(const RuntimeOptions& options) {
  return std::all_of(options.execution_providers.begin(), options.execution_providers.end(),
                     [](const ExecutionProviderOptions& p) { return IsCpu(p.name); });
}

// With shared weights: the file's initializers come from the one mapping
// and their pre-packed copies from the one container. A model ORT refuses
// that way (e.g. an initializer that is also a graph input) loads with its
// own copy, and says so.
Ort::Session OpenSession(const std::string& path, const Ort::SessionOptions& session_options,
                         const RuntimeOptions& options) {
  if (!options.shared_weights) return Ort::Session(SharedOrtEnv(), path.c_str(), session_options);
  SharedWeights& shared = *options.shared_weights;
  const MappedInitializers* initializers = shared.InitializersFor(path, options.label);
  if (initializers != nullptr && initializers->count() > 0) {
    Ort::SessionOptions with_shared = session_options.Clone();
    initializers->AddTo(with_shared);
    try {
      return Ort::Session(SharedOrtEnv(), path.c_str(), with_shared, shared.container);
    } catch (const Ort::Exception& e) {
      spdlog::warn("{}: cannot share the initializers of {} ({}); the instance keeps its own copy", options.label,
                   path, e.what());
    }
  }
  return Ort::Session(SharedOrtEnv(), path.c_str(), session_options, shared.container);
}

// A CPU session through the optimized-model cache: the saved graph with
// optimizations off when the entry is usable; otherwise the model, saving
// its optimized graph. A cache that fails in any way only costs the saving.
Ort::Session OpenThroughCache(const RuntimeOptions& options, Ort::SessionOptions& session_options,
                              ModelCacheUse* use) {
  auto entry = OptimizedModelEntry::Find(options);
  if (!entry.ok()) {
    spdlog::warn("{}: optimized-model cache unusable ({}); loading without it", options.label,
                 entry.status().message());
    return OpenSession(options.model_path, session_options, options);
  }
  if (entry->Usable()) {
    Ort::SessionOptions cached = session_options.Clone();
    cached.SetGraphOptimizationLevel(ORT_DISABLE_ALL);
    try {
      Ort::Session session = OpenSession(entry->path(), cached, options);
      *use = ModelCacheUse::kHit;
      return session;
    } catch (const Ort::Exception& e) {
      entry->Discard(std::string("ONNX Runtime cannot load it: ") + e.what());
    }
  }
  Ort::SessionOptions saving = session_options.Clone();
  saving.SetOptimizedModelFilePath(entry->staging_path().c_str());
  try {
    Ort::Session session = OpenSession(options.model_path, saving, options);
    *use = entry->Commit() ? ModelCacheUse::kMiss : ModelCacheUse::kOff;
    return session;
  } catch (const Ort::Exception& e) {
    entry->DropStaging();
    spdlog::warn("{}: optimized-model cache: not saved ({}); loading without it", options.label, e.what());
  }
  return OpenSession(options.model_path, session_options, options);
}

Result<LoadedSession> CreateWithProviders(const RuntimeOptions& options, bool cpu_only) {
  LoadedSession result;
  result.shared_thread_pool = options.shared_thread_pool && SharedOrtEnvHasThreadPool();
  if (options.shared_thread_pool && !result.shared_thread_pool) {
    spdlog::warn("{}: the ONNX Runtime env has no shared thread pool; the session gets pools of its own",
                 options.label);
  }
  Ort::SessionOptions session_options = BaseSessionOptions(options, result.shared_thread_pool);
  ORTSERVE_RETURN_IF_ERROR(RegisterOpLibraries(options.op_libraries, session_options));
  std::vector<std::string> providers{"CPUExecutionProvider"};
  if (!cpu_only) {
    auto appended = AppendExecutionProviders(options, session_options);
    if (!appended.ok()) return appended.status();
    providers = std::move(appended).value();
  }
  // GPU sessions are not cached: TensorRT's compiled partitions cannot be
  // saved as a graph, and its own engine cache covers its start-up.
  if (!options.optimized_model_cache_dir.empty() && (cpu_only || IsCpuOnly(options))) {
    result.session = OpenThroughCache(options, session_options, &result.cache_use);
  } else {
    result.session = OpenSession(options.model_path, session_options, options);
  }
  result.providers = std::move(providers);
  return result;
}

const char* CacheUseName(ModelCacheUse use) {
  switch (use) {
    case ModelCacheUse::kOff: return "off";
    case ModelCacheUse::kMiss: return "miss (saved)";
    case ModelCacheUse::kHit: return "hit";
  }
  return "off";
}

}  // namespace

std::string DescribeSession(const RuntimeOptions& options, const LoadedSession& session) {
  const std::string threads =
      session.shared_thread_pool
          ? std::string("threads: shared pool")
          : fmt::format("intra_op_threads {}, inter_op_threads {}, spinning {}", options.intra_op_threads,
                        options.inter_op_threads, options.allow_spinning ? "on" : "off");
  std::string entries;
  for (const auto& [key, value] : options.config_entries) entries += (entries.empty() ? "" : ", ") + key + "=" + value;
  return fmt::format(
      "providers [{}], {}, execution {}, mem_arena {}, mem_pattern {}, graph_optimization {}, shared "
      "weights {}, optimized-model cache {}",
      Join(session.providers), threads,
      options.execution_mode == ExecutionMode::kParallel ? "parallel" : "sequential",
      options.enable_mem_arena ? "on" : "off", options.enable_mem_pattern ? "on" : "off",
      GraphLevelName(options.graph_optimization_level), options.shared_weights ? "on" : "off",
      CacheUseName(session.cache_use)) +
         (options.op_libraries.empty() ? "" : fmt::format(", op libraries [{}]", Join(options.op_libraries))) +
         (entries.empty() ? "" : fmt::format(", session config [{}]", entries));
}

Status CheckSessionConfigEntries(const std::vector<std::pair<std::string, std::string>>& entries) {
  for (const auto& [key, value] : entries) {
    try {
      Ort::SessionOptions probe;
      probe.AddConfigEntry(key.c_str(), value.c_str());
    } catch (const Ort::Exception& e) {
      return StatusFromOrt(e, "ONNX Runtime refuses session config entry '" + key + "' = '" + value + "'");
    }
  }
  return Status::Ok();
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
