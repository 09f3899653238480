#include "config/RuntimeConfig.h"

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "config/ConfigParse.h"
#include "config/RaggedConfig.h"
#include "config/ShapeBucketConfig.h"

namespace ortserve {
namespace {

Result<int> ParseInt(const std::string& key, const std::string& value, int min) {
  int out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec != std::errc() || ptr != end || out < min) {
    return InvalidArgument("parameter '" + key + "' must be an integer >= " + std::to_string(min) +
                           ", got '" + value + "'");
  }
  return out;
}

Result<bool> ParseBool(const std::string& key, const std::string& value) {
  if (value == "1" || value == "true" || value == "True" || value == "TRUE") return true;
  if (value == "0" || value == "false" || value == "False" || value == "FALSE") return false;
  return InvalidArgument("parameter '" + key + "' must be 0/1 or true/false, got '" + value + "'");
}

QueuePolicy MakeQueuePolicy(const inference::ModelQueuePolicy& p) {
  QueuePolicy q;
  q.max_queue_size = p.max_queue_size();
  q.default_timeout_us = p.default_timeout_microseconds();
  q.allow_timeout_override = p.allow_timeout_override();
  q.timeout_action = p.timeout_action() == inference::ModelQueuePolicy::DELAY
                         ? QueuePolicy::TimeoutAction::kDelay
                         : QueuePolicy::TimeoutAction::kReject;
  return q;
}

// The server's libraries, then the model's, each path once, in that order.
Result<std::vector<std::string>> ReadOpLibraries(const inference::ModelConfig& config,
                                                 const std::vector<std::string>& server_op_libraries) {
  std::vector<std::string> libraries;
  auto add = [&libraries](const std::string& library) {
    if (std::find(libraries.begin(), libraries.end(), library) == libraries.end()) libraries.push_back(library);
  };
  for (const std::string& library : server_op_libraries) add(library);
  const auto& filenames = config.model_operations().op_library_filename();
  for (int i = 0; i < filenames.size(); ++i) {
    if (filenames[i].empty()) {
      return InvalidArgument("model_operations.op_library_filename[" + std::to_string(i) +
                             "] is empty: name a custom-operator shared library");
    }
    add(filenames[i]);
  }
  return libraries;
}

// The server's entries, then the model's "session.<key>" parameters in key order.
Result<SessionConfigEntries> ReadConfigEntries(const inference::ModelConfig& config,
                                               const SessionConfigEntries& server_config_entries) {
  SessionConfigEntries entries = server_config_entries;
  std::vector<std::string> keys;
  for (const auto& [key, value] : config.parameters())
    if (key.starts_with(kSessionConfigPrefix)) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    const std::string ort_key = key.substr(kSessionConfigPrefix.size());
    if (ort_key.empty()) {
      return InvalidArgument("parameter '" + key +
                             "' names no ONNX Runtime session key (expected session.<ort key>, e.g. "
                             "session.session.disable_prepacking)");
    }
    SetSessionConfigEntry(&entries, ort_key, config.parameters().at(key).string_value());
  }
  return entries;
}

}  // namespace

void SetSessionConfigEntry(SessionConfigEntries* entries, const std::string& key, const std::string& value) {
  for (auto& entry : *entries) {
    if (entry.first == key) {
      entry.second = value;
      return;
    }
  }
  entries->emplace_back(key, value);
}

Result<OrtSessionSettings> ReadSessionSettings(const inference::ModelConfig& config,
                                               const std::vector<std::string>& server_op_libraries,
                                               const SessionConfigEntries& server_config_entries) {
  OrtSessionSettings s;
  auto op_libraries = ReadOpLibraries(config, server_op_libraries);
  if (!op_libraries.ok()) return op_libraries.status();
  s.op_libraries = std::move(op_libraries).value();
  auto entries = ReadConfigEntries(config, server_config_entries);
  if (!entries.ok()) return entries.status();
  s.config_entries = std::move(entries).value();
  const auto& params = config.parameters();
  auto get = [&](const char* key) -> const std::string* {
    auto it = params.find(key);
    return it == params.end() ? nullptr : &it->second.string_value();
  };
  if (auto* v = get("intra_op_thread_count")) {
    auto n = ParseInt("intra_op_thread_count", *v, 0);
    if (!n.ok()) return n.status();
    s.intra_op_threads = n.value();
  }
  if (auto* v = get("inter_op_thread_count")) {
    auto n = ParseInt("inter_op_thread_count", *v, 0);
    if (!n.ok()) return n.status();
    s.inter_op_threads = std::max(1, n.value());
  }
  if (auto* v = get("execution_mode")) {
    auto n = ParseInt("execution_mode", *v, 0);
    if (!n.ok()) return n.status();
    if (n.value() > 1) {
      return InvalidArgument("parameter 'execution_mode' must be 0 (sequential) or 1 (parallel), got '" +
                             *v + "'");
    }
    s.execution_mode = n.value() == 1 ? ExecutionMode::kParallel : ExecutionMode::kSequential;
  }
  if (auto* v = get("enable_mem_arena")) {
    auto b = ParseBool("enable_mem_arena", *v);
    if (!b.ok()) return b.status();
    s.enable_mem_arena = b.value();
  }
  if (auto* v = get("enable_mem_pattern")) {
    auto b = ParseBool("enable_mem_pattern", *v);
    if (!b.ok()) return b.status();
    s.enable_mem_pattern = b.value();
  }
  if (auto* v = get("allow_spinning")) {
    auto b = ParseBool("allow_spinning", *v);
    if (!b.ok()) return b.status();
    s.allow_spinning = b.value();
  }
  if (auto* v = get("ort_thread_pool")) {
    if (*v != "own" && *v != "shared") {
      return InvalidArgument("parameter 'ort_thread_pool' must be 'shared' or 'own', got '" + *v + "'");
    }
    s.own_thread_pool = *v == "own";
  }
  auto gpu = ReadGpuSettings(config);
  if (!gpu.ok()) return gpu.status();
  s.gpu = std::move(gpu).value();
  if (config.optimization().has_graph()) {
    switch (config.optimization().graph().level()) {
      case -1: s.graph_optimization_level = GraphOptimizationLevel::kBasic; break;
      case 1: s.graph_optimization_level = GraphOptimizationLevel::kExtended; break;
      default: s.graph_optimization_level = GraphOptimizationLevel::kAll; break;
    }
  }
  return s;
}

Result<std::vector<InstanceSpec>> ExpandInstanceGroups(const inference::ModelConfig& config) {
  std::vector<InstanceSpec> out;
  uint64_t total = 0;
  for (const auto& group : config.instance_group()) {
    const int count = group.count() == 0 ? 1 : group.count();
    if (count < 0 || count > kMaxInstancesPerModel) {
      return Unavailable("instance_group '" + group.name() + "': count must be within [1, " +
                         std::to_string(kMaxInstancesPerModel) + "], got " +
                         std::to_string(group.count()));
    }
    // Checked before expanding: gpus x count could otherwise allocate without bound.
    total += static_cast<uint64_t>(count) * std::max(1, group.gpus_size());
    if (total > static_cast<uint64_t>(kMaxInstancesPerModel)) {
      return Unavailable("instance_group: more than " + std::to_string(kMaxInstancesPerModel) +
                         " instances in total for model '" + config.name() + "'");
    }
    switch (group.kind()) {
      case inference::ModelInstanceGroup::KIND_CPU:
      case inference::ModelInstanceGroup::KIND_AUTO:
        for (int i = 0; i < count; ++i) out.push_back({false, 0});
        break;
      case inference::ModelInstanceGroup::KIND_GPU:
        if (group.gpus_size() == 0) {
          for (int i = 0; i < count; ++i) out.push_back({true, 0});
        } else {
          for (int gpu : group.gpus()) {
            for (int i = 0; i < count; ++i) out.push_back({true, gpu});
          }
        }
        break;
      default:
        return Unavailable("instance_group kind " +
                           inference::ModelInstanceGroup::Kind_Name(group.kind()) +
                           " is not supported (use KIND_CPU, KIND_GPU or KIND_AUTO)");
    }
  }
  if (out.empty()) out.push_back({false, 0});
  return out;
}

RuntimeOptions MakeRuntimeOptions(const OrtSessionSettings& settings, int intra_op_threads,
                                  const InstanceSpec& instance, const std::string& model_path,
                                  const std::string& label, const std::string& model_cache_root) {
  RuntimeOptions o;
  o.model_path = model_path;
  o.intra_op_threads = std::max(1, intra_op_threads);
  o.inter_op_threads = settings.inter_op_threads;
  o.allow_spinning = settings.allow_spinning;
  o.execution_mode = settings.execution_mode;
  o.enable_mem_arena = settings.enable_mem_arena;
  o.enable_mem_pattern = settings.enable_mem_pattern;
  o.graph_optimization_level = settings.graph_optimization_level;
  o.op_libraries = settings.op_libraries;
  o.config_entries = settings.config_entries;
  if (instance.gpu) {
    // Strict unless allow_cpu_fallback: the runtime fails the load if CUDA is unusable.
    const std::string version = std::filesystem::path(model_path).parent_path().filename().string();
    ApplyGpuSettings(settings.gpu, instance.device_id,
                     ModelCacheDir(model_cache_root, settings.gpu.model_name, version), &o);
  }
  o.label = label;
  return o;
}

namespace {

// dynamic_batching.priority_levels and its per-level queue policies.
Status ReadPriorities(const inference::ModelDynamicBatching& db, QueueingPolicy* q) {
  if (db.priority_levels() > 1000) {
    return Unavailable("dynamic_batching.priority_levels " + std::to_string(db.priority_levels()) +
                       " is too large");
  }
  q->priority_levels = static_cast<uint32_t>(db.priority_levels());
  if (q->priority_levels > 0) {
    q->default_priority_level = static_cast<uint32_t>(db.default_priority_level());
    if (q->default_priority_level < 1 || q->default_priority_level > q->priority_levels) {
      return Unavailable("dynamic_batching.default_priority_level " + std::to_string(db.default_priority_level()) +
                         " is outside [1, " + std::to_string(q->priority_levels) + "]");
    }
  }
  for (const auto& [level, policy] : db.priority_queue_policy()) {
    if (level < 1 || level > q->priority_levels) {
      return Unavailable("dynamic_batching.priority_queue_policy level " + std::to_string(level) +
                         " is outside [1, priority_levels " + std::to_string(q->priority_levels) + "]");
    }
    q->level_policies.emplace_back(static_cast<uint32_t>(level), MakeQueuePolicy(policy));
  }
  std::sort(q->level_policies.begin(), q->level_policies.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return Status::Ok();
}

}  // namespace

namespace {

// A string parameter that must be `when_false` (its default) or `when_true`.
Result<bool> ReadTwoWayParameter(const inference::ModelConfig& config, const char* key, const char* when_false,
                                 const char* when_true) {
  auto it = config.parameters().find(key);
  if (it == config.parameters().end()) return false;
  const std::string& value = it->second.string_value();
  if (value != when_false && value != when_true) {
    return Unavailable(std::string("parameter '") + key + "' must be '" + when_true + "' or '" + when_false +
                       "', got '" + value + "'");
  }
  return value == when_true;
}

}  // namespace

Result<bool> ReadAdaptiveWindow(const inference::ModelConfig& config) {
  return ReadTwoWayParameter(config, kBatchWindowParameter, "fixed", "adaptive");
}

Result<bool> ReadSharedInstanceBatches(const inference::ModelConfig& config) {
  return ReadTwoWayParameter(config, kInstanceBatchesParameter, "whole", "shared");
}

Result<uint64_t> ReadInlineRunMaxUs(const inference::ModelConfig& config) {
  auto it = config.parameters().find(kInlineRunMaxUsParameter);
  if (it == config.parameters().end()) return static_cast<uint64_t>(kDefaultInlineRunMaxUs);
  auto us = ParseInt(kInlineRunMaxUsParameter, it->second.string_value(), 0);
  if (!us.ok()) return us.status();
  return static_cast<uint64_t>(us.value());
}

Result<DynamicBatcherOptions> MakeDynamicBatcherOptions(const inference::ModelConfig& config,
                                                        const std::string& version) {
  DynamicBatcherOptions s;
  s.model_name = config.name();
  s.model_version = version;
  BatchingPolicy& b = s.batching;
  b.max_batch_size = config.max_batch_size();
  b.ragged = MakeRaggedBatching(config);
  auto shared = ReadSharedInstanceBatches(config);
  if (!shared.ok()) return shared.status();
  s.compute.balance_across_instances = shared.value();
  auto inline_us = ReadInlineRunMaxUs(config);
  if (!inline_us.ok()) return inline_us.status();
  s.compute.inline_run_max_us = inline_us.value();
  if (!config.has_dynamic_batching()) return s;
  const auto& db = config.dynamic_batching();
  b.dynamic_batching = true;
  for (int p : db.preferred_batch_size()) {
    if (p < 1 || (config.max_batch_size() > 0 && p > config.max_batch_size())) {
      return Unavailable("dynamic_batching.preferred_batch_size " + std::to_string(p) +
                         " is outside [1, max_batch_size " + std::to_string(config.max_batch_size()) + "]");
    }
    b.preferred_batch_sizes.push_back(p);
  }
  b.max_queue_delay_us = db.max_queue_delay_microseconds();
  auto adaptive = ReadAdaptiveWindow(config);
  if (!adaptive.ok()) return adaptive.status();
  b.adaptive_window = adaptive.value();
  // Padded requests come in a few interleaved shapes, one per bucket.
  b.group_by_shape = config.parameters().count(kShapeBucketsParameter) > 0;
  // Without default_queue_policy the batcher's defaults stand (request
  // timeouts honoured, global queue bound).
  if (db.has_default_queue_policy()) s.queueing.default_policy = MakeQueuePolicy(db.default_queue_policy());
  ORTSERVE_RETURN_IF_ERROR(ReadPriorities(db, &s.queueing));
  return s;
}

}  // namespace ortserve
