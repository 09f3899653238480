#include "app/TritonFlags.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <iostream>
#include <tuple>

#include "server/common/LogControl.h"

namespace ortserve::app {
namespace {

// Triton prints its command-line warnings to stderr, outside its log, as
// "Warning: ..." (std::cerr in its command_line_parser.cc, whatever the log
// format); deployments and Triton's QA (L0_model_config cli_messages,
// L0_cmdline_trace) grep the server's output for these texts. In JSON mode
// the line is a JSON object whose message is that same text, so a grep for
// Triton's words still finds it.
void CommandLineWarning(const std::string& text, bool json) {
  const std::string line = "Warning: " + text;
  if (json) {
    std::cerr << common::FormatJsonLogLine(spdlog::level::warn, line) << std::flush;
  } else {
    std::cerr << line << std::endl;
  }
}

constexpr const char* kGroup = "Triton compatibility";

// Triton's ParseBackendConfigOption: "<backend>,<setting>=<value>" for one
// backend, "<setting>=<value>" for all.
Result<std::tuple<std::string, std::string, std::string>> ParseBackendConfig(const std::string& arg) {
  const size_t comma = arg.find(',');
  if (comma == 0) {
    return InvalidArgument("No backend specified. --backend-config option format is <backend name>,<setting>=<value> "
                           "or <setting>=<value>. Got " + arg);
  }
  const size_t setting_start = comma == std::string::npos ? 0 : comma + 1;
  const size_t equals = arg.find('=', setting_start);
  const std::string setting = equals == std::string::npos ? "" : arg.substr(setting_start, equals - setting_start);
  const std::string value = equals == std::string::npos ? "" : arg.substr(equals + 1);
  if (setting.empty() || value.empty()) {
    return InvalidArgument("--backend-config option format is '<backend name>,<setting>=<value>'. Got " + arg);
  }
  return std::make_tuple(comma == std::string::npos ? std::string() : arg.substr(0, comma), setting, value);
}

Result<int> ParseMaxBatchSize(const std::string& value) {
  int parsed = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size() || parsed < 0) {
    return InvalidArgument("--backend-config default-max-batch-size must be a non-negative integer, got '" + value +
                           "'");
  }
  return parsed;
}

// One --backend-config entry applied to `settings`, or logged.
Status ApplyBackendConfig(const std::string& arg, TritonSettings* settings) {
  AutoCompletePolicy* policy = &settings->auto_complete;
  auto parsed = ParseBackendConfig(arg);
  if (!parsed.ok()) return parsed.status();
  const auto& [backend, setting, value] = parsed.value();
  if (!backend.empty() && backend != "onnxruntime") {
    spdlog::info("--backend-config={}: ignored (ortserve serves ONNX models with ONNX Runtime only)", arg);
    return Status::Ok();
  }
  if (setting == "default-max-batch-size") {
    auto size = ParseMaxBatchSize(value);
    if (!size.ok()) return size.status();
    policy->default_max_batch_size = size.value();
    spdlog::info("auto-complete gives batchable models max_batch_size {} (--backend-config={})", size.value(), arg);
    return Status::Ok();
  }
  if (setting.starts_with(kSessionConfigPrefix) && setting.size() > kSessionConfigPrefix.size()) {
    const std::string key = setting.substr(kSessionConfigPrefix.size());
    SetSessionConfigEntry(&settings->session_config_entries, key, value);
    spdlog::info("ONNX Runtime session config entry {}={} for every model (--backend-config={})", key, value, arg);
    if (key.find('.') == std::string::npos) {
      spdlog::warn("--backend-config={}: ONNX Runtime ignores keys it does not know, and its keys are "
                   "'<area>.<name>'; for ORT's key '{}' write 'session.{}'",
                   arg, setting, setting);
    }
    return Status::Ok();
  }
  if (setting == "enable-global-threadpool" || setting == "intra_op_thread_count" ||
      setting == "inter_op_thread_count") {
    spdlog::info("--backend-config={}: accepted without effect (--thread-budget plans ortserve's threads; a model "
                 "sets its own with the parameters intra_op_thread_count / inter_op_thread_count)",
                 arg);
    return Status::Ok();
  }
  spdlog::info("--backend-config={}: ignored (not a setting ortserve knows)", arg);
  return Status::Ok();
}

// Triton's ParseCacheConfigOption: "<cache>,<setting>=<value>". Only the
// local cache exists here, and its one setting is size (bytes).
Status ApplyCacheConfig(const std::string& arg, uint64_t* bytes) {
  const size_t comma = arg.find(',');
  if (comma == 0 || comma == std::string::npos) {
    return InvalidArgument("No cache specified. --cache-config option format is <cache name>,<setting>=<value>. "
                           "Got " + arg);
  }
  const size_t equals = arg.find('=', comma + 1);
  if (equals == std::string::npos) {
    return InvalidArgument("--cache-config option format is '<cache name>,<setting>=<value>'. Got " + arg);
  }
  const std::string cache = arg.substr(0, comma);
  const std::string setting = arg.substr(comma + 1, equals - comma - 1);
  const std::string value = arg.substr(equals + 1);
  if (cache != "local") {
    return InvalidArgument("--cache-config=" + arg + ": ortserve has only the 'local' cache (in process), not '" +
                           cache + "'");
  }
  if (setting != "size") {
    return InvalidArgument("--cache-config=" + arg + ": the local cache's only setting is size (bytes), not '" +
                           setting + "'");
  }
  uint64_t parsed = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size()) {
    return InvalidArgument("--cache-config=" + arg + ": size must be a non-negative integer (bytes), got '" + value +
                           "'");
  }
  *bytes = parsed;
  return Status::Ok();
}

Result<uint64_t> ApplyCacheFlags(const CLI::App& app, const TritonFlags& f, bool json_warnings) {
  const bool deprecated_size = app.count("--response-cache-byte-size") > 0;
  if (deprecated_size && !f.cache_config.empty()) {
    return InvalidArgument("Error: Incompatible flags --response-cache-byte-size and --cache-config both provided. "
                           "Please provide one or the other.");
  }
  uint64_t bytes = 0;
  if (deprecated_size) {
    if (f.response_cache_byte_size < 0) return InvalidArgument("--response-cache-byte-size must not be negative");
    bytes = static_cast<uint64_t>(f.response_cache_byte_size);
    CommandLineWarning(
        "'--response-cache-byte-size' has been deprecated! Please use '--cache-config' instead. The equivalent "
        "--cache-config CLI args would be: '--cache-config=local,size=" +
            std::to_string(bytes) + "'",
        json_warnings);
  }
  for (const std::string& arg : f.cache_config) ORTSERVE_RETURN_IF_ERROR(ApplyCacheConfig(arg, &bytes));
  if (bytes > 0) {
    spdlog::info("response cache: local, {} bytes (models opt in with response_cache {{ enable: true }})", bytes);
  }
  return bytes;
}

}  // namespace

void AddTritonFlags(CLI::App& app, TritonFlags& f) {
  app.add_flag("--disable-auto-complete-config", f.disable_auto_complete_config,
               "Triton's: configs are not completed from the model file; every model needs a config.pbtxt that "
               "lists its inputs and outputs")
      ->group(kGroup);
  app.add_option("--strict-model-config", f.strict_model_config,
                 "Triton's deprecated form of --disable-auto-complete-config: true means the same")
      ->group(kGroup);
  app.add_option("--backend-config", f.backend_config,
                 "<backend>,<setting>=<value> or <setting>=<value> (repeatable; Triton's). default-max-batch-size=N "
                 "(for all backends or onnxruntime): the max_batch_size auto-complete gives a batchable model "
                 "(default 4, as Triton's; 0: it does not batch). session.<ort key>=<value>: an ONNX Runtime "
                 "session config entry (AddConfigEntry) for every model, e.g. onnxruntime,session.mlas."
                 "disable_kleidiai=1; a model's parameter session.<ort key> replaces it. The onnxruntime backend's "
                 "enable-global-threadpool, intra_op_thread_count and inter_op_thread_count are accepted without "
                 "effect (--thread-budget plans the threads); other backends' settings are ignored. Each is logged")
      ->group(kGroup);
  app.add_option("--allow-client-shm", f.allow_client_shm,
                 "Triton's: true lets clients register and unregister system shared memory regions and use them "
                 "for inputs and outputs (docs/shared-memory.md); false (the default, as Triton's) refuses "
                 "registration with HTTP 501 / gRPC UNIMPLEMENTED naming this flag")
      ->group(kGroup);
  app.add_option("--model-load-thread-count", f.model_load_thread_count,
                 "Triton's; accepted without effect: ortserve loads one model at a time on its model-loader thread")
      ->check(CLI::PositiveNumber)
      ->group(kGroup);
  app.add_option("--backend-directory", f.backend_directory,
                 "Triton's; accepted without effect: ONNX Runtime is built into ortserve")
      ->group(kGroup);
  app.add_option("--repoagent-directory", f.repoagent_directory,
                 "Triton's; accepted without effect: ortserve has no repository agents")
      ->group(kGroup);
  app.add_option("--cache-config", f.cache_config,
                 "local,size=BYTES: the response cache (Triton's flag; only the in-process 'local' cache exists). "
                 "One LRU cache shared by every model whose config has response_cache { enable: true }; 0 or "
                 "absent: no cache")
      ->group(kGroup);
  app.add_option("--response-cache-byte-size", f.response_cache_byte_size,
                 "Triton's deprecated form of --cache-config local,size=BYTES")
      ->group(kGroup);
  app.add_option("--cache-directory", f.cache_directory,
                 "Triton's; accepted without effect: the local cache is built into ortserve")
      ->group(kGroup);
}

Result<TritonSettings> ApplyTritonFlags(const CLI::App& app, const TritonFlags& f, bool json_warnings) {
  TritonSettings settings;
  AutoCompletePolicy& policy = settings.auto_complete;
  const bool strict_model_config_given = app.count("--strict-model-config") > 0;
  if (strict_model_config_given) {
    CommandLineWarning("'--strict-model-config' has been deprecated! Please use '--disable-auto-complete-config' instead.",
                       json_warnings);
  }
  if (f.disable_auto_complete_config && strict_model_config_given && !f.strict_model_config) {
    CommandLineWarning(
        "Overriding deprecated '--strict-model-config' from False to True in favor of "
        "'--disable-auto-complete-config'!", json_warnings);
  }
  if (f.disable_auto_complete_config || f.strict_model_config) {
    policy.enabled = false;
    spdlog::info("config auto-complete disabled: every model needs a complete config.pbtxt");
  }
  for (const std::string& arg : f.backend_config) ORTSERVE_RETURN_IF_ERROR(ApplyBackendConfig(arg, &settings));
  for (const char* name : {"--model-load-thread-count", "--backend-directory", "--repoagent-directory",
                           "--cache-directory"}) {
    if (app.count(name) > 0) spdlog::info("{}: accepted without effect (see --help)", name);
  }
  auto cache_bytes = ApplyCacheFlags(app, f, json_warnings);
  if (!cache_bytes.ok()) return cache_bytes.status();
  settings.response_cache_bytes = cache_bytes.value();
  return settings;
}

}  // namespace ortserve::app
