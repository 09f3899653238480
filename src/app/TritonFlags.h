#pragma once
// Triton's command-line flags that deployments pass (tritonserver's
// src/command_line_parser.cc): registered beside ortserve's own, honoured
// where they mean something here, accepted with one log line where they do
// not, so that a Triton command line starts ortserve unchanged.
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "config/ConfigAutoComplete.h"
#include "config/RuntimeConfig.h"
#include "core/Status.h"

namespace ortserve::app {

struct TritonFlags {
  bool disable_auto_complete_config = false;
  bool strict_model_config = false;  // deprecated in Triton; true means the same as the flag above
  std::vector<std::string> backend_config;  // "<backend>,<setting>=<value>" or "<setting>=<value>"
  bool allow_client_shm = false;
  int model_load_thread_count = 4;
  std::string backend_directory;
  std::string repoagent_directory;
  std::vector<std::string> cache_config;  // "<cache>,<setting>=<value>"
  int64_t response_cache_byte_size = 0;  // deprecated in Triton: --cache-config local,size=N
  std::string cache_directory;
};

// What the flags set.
struct TritonSettings {
  AutoCompletePolicy auto_complete;
  uint64_t response_cache_bytes = 0;  // 0: no response cache
  // --backend-config=onnxruntime,session.<ort key>=V, in order (a later key replaces).
  SessionConfigEntries session_config_entries;
};

// Registers them on `app` in the group "Triton compatibility".
void AddTritonFlags(CLI::App& app, TritonFlags& f);

// What the flags set: the auto-complete policy and the response cache. Logs
// one line per flag that is accepted without effect (and Triton's
// deprecation warnings for --strict-model-config and
// --response-cache-byte-size, on stderr as Triton prints them: "Warning: ..."
// lines, or with `json_warnings` (--log-format=json) the same text as the
// message of a JSON log line at level WARNING). kInvalidArgument in Triton's
// words for a malformed --backend-config or --cache-config, a bad
// default-max-batch-size or cache size, a cache other than 'local', or both
// cache flags at once.
Result<TritonSettings> ApplyTritonFlags(const CLI::App& app, const TritonFlags& f, bool json_warnings = false);

}  // namespace ortserve::app
