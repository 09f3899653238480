#include "app/CheckCommand.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "app/Flags.h"
#include "app/SingleModelLayout.h"
#include "repository/RepositoryCheck.h"
#include "server/http/ModelJson.h"
#include "server/json/JsonWriter.h"

namespace ortserve::app {
namespace {

// One model's verdict as a JSON line (see CheckCommand.h).
std::string VerdictJson(const ModelVerdict& v) {
  std::string out = "{\"model\":";
  JsonWriter::AppendQuoted(&out, v.name);
  out += std::string(",\"would_load\":") + (v.ok() ? "true" : "false") + ",\"versions\":[";
  const std::pair<int64_t, inference::ModelConfig>* newest = nullptr;
  for (const auto& version : v.versions) {
    out += (newest ? "," : "") + std::to_string(version.first);
    if (!newest || version.first > newest->first) newest = &version;
  }
  out += "],\"config\":";
  Result<std::string> config = newest ? http::ModelConfigJson(newest->second) : Result<std::string>("null");
  out += config.ok() ? config.value() : "null";
  out += ",\"errors\":[";
  for (size_t i = 0; i < v.errors.size(); ++i) {
    if (i > 0) out += ',';
    JsonWriter::AppendQuoted(&out, v.errors[i]);
  }
  if (!config.ok()) {
    if (!v.errors.empty()) out += ',';
    JsonWriter::AppendQuoted(&out, config.status().message());
  }
  return out + "]}";
}

}  // namespace

int RunCheck(int argc, char** argv) {
  CLI::App app{"ortserve check: loads nothing, serves nothing; says for each model of --model-repository "
               "whether a server started with the same flags would load it (one JSON line per model on "
               "standard output: model, would_load, versions, config as GET /v2/models/<m>/config answers, "
               "errors). Exit status 0: all would load; 1: one would not; 2: bad flags",
               "ortserve check"};
  Flags flags;
  AddFlags(app, flags);
  bool load = false;
  app.add_flag("--load", load,
               "Also create each version's ONNX Runtime sessions and run its warm-up (and reference check), as "
               "a load does, so that errors only those reveal are reported too; slower, and needs the memory "
               "(and GPUs) the server would");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  auto logger = spdlog::stderr_color_mt("check");
  logger->set_level(flags.log_verbose > 0 ? spdlog::level::debug : spdlog::level::warn);
  spdlog::set_default_logger(logger);
  if (Status st = MapSingleModelRepository(&flags.model_repository, flags.single_model_name); !st.ok()) {
    spdlog::critical("{}", st.message());
    return 2;
  }
  // The links of a single model's directory go with the check.
  const SingleModelLinksRemover remove_links(flags.model_repository);
  auto triton = ApplyTritonFlags(app, flags.triton, flags.log_format == "json");
  if (!triton.ok()) {
    spdlog::critical("{}", triton.status().message());
    return 2;
  }
  auto options = RepositoryOptionsFrom(flags, triton.value());
  if (!options.ok()) {
    spdlog::critical("{}", options.status().message());
    return 2;
  }
  const std::vector<ModelVerdict> verdicts =
      CheckRepository(options.value(), load ? CheckDepth::kSessions : CheckDepth::kConfig);
  size_t failing = 0;
  for (const ModelVerdict& v : verdicts) {
    std::cout << VerdictJson(v) << '\n';
    if (v.ok()) continue;
    ++failing;
    for (const std::string& error : v.errors) spdlog::error("model '{}' would fail to load: {}", v.name, error);
  }
  std::cout.flush();
  std::fprintf(stderr, "ortserve check: %zu model(s), %zu would load, %zu would not\n", verdicts.size(),
               verdicts.size() - failing, failing);
  return failing == 0 ? 0 : 1;
}

}  // namespace ortserve::app
