#include "app/TritonFlags.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <tuple>

namespace ortserve::app {
namespace {

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

// One --backend-config entry applied to `policy`, or logged.
Status ApplyBackendConfig(const std::string& arg, AutoCompletePolicy* policy) {
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
                 "(default 4, as Triton's; 0: it does not batch). The onnxruntime backend's "
                 "enable-global-threadpool, intra_op_thread_count and inter_op_thread_count are accepted without "
                 "effect (--thread-budget plans the threads); other backends' settings are ignored. Each is logged")
      ->group(kGroup);
  app.add_option("--allow-client-shm", f.allow_client_shm,
                 "Triton's; accepted without effect: ortserve has no shared-memory extension (its endpoints answer "
                 "404 / UNIMPLEMENTED)")
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
}

Result<AutoCompletePolicy> ApplyTritonFlags(const CLI::App& app, const TritonFlags& f) {
  AutoCompletePolicy policy;
  if (app.count("--strict-model-config") > 0) {
    spdlog::warn("'--strict-model-config' has been deprecated! Please use '--disable-auto-complete-config' instead.");
  }
  if (f.disable_auto_complete_config || f.strict_model_config) {
    policy.enabled = false;
    spdlog::info("config auto-complete disabled: every model needs a complete config.pbtxt");
  }
  for (const std::string& arg : f.backend_config) ORTSERVE_RETURN_IF_ERROR(ApplyBackendConfig(arg, &policy));
  for (const char* name : {"--allow-client-shm", "--model-load-thread-count", "--backend-directory",
                           "--repoagent-directory"}) {
    if (app.count(name) > 0) spdlog::info("{}: accepted without effect (see --help)", name);
  }
  return policy;
}

}  // namespace ortserve::app
