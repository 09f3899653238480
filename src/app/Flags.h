#pragma once
// ortserve's command line: every flag's variable, default and help text.
// main() (main.cpp) turns them into the layers' options.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/TritonFlags.h"
#include "repository/ModelRepository.h"
#include "server/grpc/GrpcServer.h"
#include "server/http/HttpServer.h"
#include "server/metrics/MetricsServer.h"

namespace ortserve::app {

// The HTTP limits' defaults live in HttpServerOptions; the flags start there.
inline const HttpServerOptions kHttpDefaults{};

struct Flags {
  std::string model_repository;
  std::string single_model_name;  // SingleModelLayout.h
  uint16_t http_port = 8000;
  std::string http_address = "0.0.0.0";
  int http_thread_count = 0;
  uint16_t grpc_port = 8001;
  std::string grpc_address = "0.0.0.0";
  int grpc_thread_count = 2;
  uint64_t grpc_max_message_size = 64ull << 20;
  int grpc_max_concurrent_streams = 128;
  size_t grpc_max_connections = GrpcServerOptions{}.max_connections;
  uint64_t grpc_max_buffered_bytes = 1ull << 30;
  uint16_t metrics_port = 8002;
  std::string metrics_address = "0.0.0.0";
  bool allow_metrics = true;
  size_t metrics_max_connections = metrics::MetricsServerOptions{}.max_connections;
  bool access_log = false;
  double access_log_sample_rate = 1.0;
  std::string trace_otlp_endpoint;  // empty: no tracing
  double trace_sample_rate = 0.01;
  size_t trace_buffer_spans = 8192;
  bool strict_readiness = true;
  bool exit_on_error = false;  // Triton's default is true: docs/triton-differences.md
  int exit_timeout_secs = 30;
  int drain_delay_secs = 0;
  uint64_t http_max_input_size = kHttpDefaults.max_input_size;
  size_t http_max_header_size = kHttpDefaults.max_header_bytes;
  size_t http_max_body_chunks = kHttpDefaults.max_body_chunks;
  size_t http_max_connections = kHttpDefaults.max_connections;
  size_t http_max_json_depth = kHttpDefaults.max_json_depth;
  uint64_t max_tensor_elements = kHttpDefaults.max_tensor_elements;
  size_t max_shm_regions = common::kDefaultMaxSharedMemoryRegions;
  int http_idle_timeout_secs = static_cast<int>(kHttpDefaults.idle_timeout.count());
  int http_read_timeout_secs = static_cast<int>(kHttpDefaults.read_timeout.count());
  int thread_budget = 0;  // 0: DetectCpuBudget() (CpuBudget.h); main() resolves it
  std::string ort_thread_pool = "shared";  // "shared" | "per-session"
  int log_verbose = 0;
  // Triton's log flags (server/common/LogControl.h).
  bool log_info = true;
  bool log_warning = true;
  bool log_error = true;
  std::string log_format = "default";
  std::string log_file;
  std::string model_control_mode = "none";
  int repository_poll_secs = 15;
  std::vector<std::string> load_models;
  bool model_load_on_demand = false;
  int model_load_wait_secs = 60;
  std::string model_memory_budget = "0";  // bytes, K/M/G suffixes; 0: none
  std::string model_cache_dir;
  std::vector<std::string> op_libraries;  // --op-library
  std::string model_signature_policy = "off";         // --model-signature-policy
  std::vector<std::string> model_signing_public_keys;  // --model-signing-public-key
  std::vector<std::string> model_signing_certificate_chains;  // --model-signing-certificate-chain
  // Access control and TLS (help texts in Flags.cpp).
  std::vector<std::string> http_restricted_api;
  std::vector<std::string> grpc_restricted_protocol;
  // "<groups>:<key>=<file>": the same restrictions with the value read from a file (SecretFiles.h).
  std::vector<std::string> http_restricted_api_files;
  std::vector<std::string> grpc_restricted_protocol_files;
  bool allow_unauthenticated_model_control = false;
  std::string client_quota_config;  // empty: no quotas (server/common/QuotaConfig.h)
  std::string client_id_header;
  bool http_use_ssl = false;
  std::string http_server_cert;
  std::string http_server_key;
  std::string http_root_cert;
  bool grpc_use_ssl = false;
  bool grpc_use_ssl_mutual = false;
  std::string grpc_server_cert;
  std::string grpc_server_key;
  std::string grpc_root_cert;
  TritonFlags triton;  // Triton's flags (TritonFlags.h)
};

// Registers every flag on `app`, bound to `f`, in --help's order.
void AddFlags(CLI::App& app, Flags& f);

// The repository's options from the flags (the server's and `ortserve
// check`'s); kInvalidArgument for --load-model outside explicit mode.
Result<RepositoryOptions> RepositoryOptionsFrom(const Flags& flags, const TritonSettings& triton);

// --http-thread-count 0: HTTP I/O threads for the CPUs this process may use.
int DefaultHttpThreads(int cpus);

}  // namespace ortserve::app
