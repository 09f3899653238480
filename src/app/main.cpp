// ortserve: serves a Triton-layout repository of ONNX models over KServe v2.
// main() parses flags, wires the layers together and owns the shutdown order:
// stop accepting → drain in-flight requests → stop schedulers → stop I/O.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <pthread.h>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/MallocName.h"
#include "repository/ModelRepository.h"
#include "runtime/OrtModelInstance.h"
#include "server/grpc/GrpcServer.h"
#include "server/http/HttpServer.h"
#include "server/metrics/AccessLog.h"
#include "server/metrics/MetricsCollector.h"
#include "server/metrics/MetricsServer.h"
#include "server/tracing/OtlpExporter.h"
#include "server/tracing/RequestTracer.h"

namespace {

// The HTTP limits' defaults live in HttpServerOptions; the flags start there.
const ortserve::HttpServerOptions kHttpDefaults{};

struct Flags {
  std::string model_repository;
  uint16_t http_port = 8000;
  std::string http_address = "0.0.0.0";
  int http_thread_count = 0;
  uint16_t grpc_port = 8001;
  std::string grpc_address = "0.0.0.0";
  int grpc_thread_count = 2;
  uint64_t grpc_max_message_size = 64ull << 20;
  uint16_t metrics_port = 8002;
  std::string metrics_address = "0.0.0.0";
  bool allow_metrics = true;
  bool access_log = false;
  double access_log_sample_rate = 1.0;
  std::string trace_otlp_endpoint;  // empty: no tracing
  double trace_sample_rate = 0.01;
  size_t trace_buffer_spans = 8192;
  bool strict_readiness = true;
  int exit_timeout_secs = 30;
  uint64_t http_max_input_size = kHttpDefaults.max_input_size;
  size_t http_max_header_size = kHttpDefaults.max_header_bytes;
  size_t http_max_body_chunks = kHttpDefaults.max_body_chunks;
  size_t http_max_connections = kHttpDefaults.max_connections;
  size_t http_max_json_depth = kHttpDefaults.max_json_depth;
  uint64_t max_tensor_elements = kHttpDefaults.max_tensor_elements;
  int http_idle_timeout_secs = static_cast<int>(kHttpDefaults.idle_timeout.count());
  int http_read_timeout_secs = static_cast<int>(kHttpDefaults.read_timeout.count());
  int thread_budget = 0;
  int log_verbose = 0;
  std::string model_control_mode = "none";
  int repository_poll_secs = 15;
  std::vector<std::string> load_models;
  std::string model_cache_dir;
  // Access control and TLS (docs in AddFlags).
  std::vector<std::string> http_restricted_api;
  std::vector<std::string> grpc_restricted_protocol;
  bool allow_unauthenticated_model_control = false;
  bool http_use_ssl = false;
  std::string http_server_cert;
  std::string http_server_key;
  std::string http_root_cert;
  bool grpc_use_ssl = false;
  bool grpc_use_ssl_mutual = false;
  std::string grpc_server_cert;
  std::string grpc_server_key;
  std::string grpc_root_cert;
};

int DefaultHttpThreads() {
  // HTTP threads only parse and encode (~10 us of CPU for a small request), so
  // a few keep up with the models and leave the cores to inference. Under 4
  // cores one is the default: it serves ~100k small requests/s, more than any
  // real model computes there. A second one raises a no-op-sized model's
  // throughput (2 cores, tiny model, wrk -c32: +8-17%) but takes turns with
  // the model's threads and the clients on the same cores: p99 0.5 -> up to
  // 2-3 ms, and perf_analyzer's HTTP rate on tiny and wrk's on the batching
  // mlp fell 8-14% (bench/FINDINGS.md, stops 12 and 15).
  unsigned cores = std::thread::hardware_concurrency();
  if (cores < 4) return 1;
  return cores >= 8 ? 4 : 2;
}

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--model-repository", f.model_repository,
                 "Path of the model repository (Triton layout: <model>/<version>/model.onnx "
                 "and optional <model>/config.pbtxt)")
      ->required();
  app.add_option("--http-port", f.http_port, "Port of the KServe v2 HTTP endpoint")
      ->capture_default_str();
  app.add_option("--http-address", f.http_address, "Address the HTTP endpoint binds to")
      ->capture_default_str();
  app.add_option("--http-thread-count", f.http_thread_count,
                 "HTTP I/O threads (0: 1 on machines with under 4 cores, 2 on 4-7, 4 on 8+). "
                 "They never run inference")
      ->capture_default_str();
  app.add_option("--http-max-input-size", f.http_max_input_size,
                 "Largest request body accepted, in bytes, also after decompression")
      ->capture_default_str();
  app.add_option("--http-max-header-size", f.http_max_header_size,
                 "Largest request line + headers, in bytes (more: 431)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--http-max-body-chunks", f.http_max_body_chunks,
                 "Most chunks in one chunked request body (more: 413)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 32))
      ->capture_default_str();
  app.add_option("--http-max-connections", f.http_max_connections,
                 "Most HTTP client connections open at once. One more is answered 503 at once (HTTPS: "
                 "closed) and counted in ortserve_connections_rejected_total{protocol=\"http\"}")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--http-max-json-depth", f.http_max_json_depth,
                 "Deepest nesting of objects and arrays in an infer request's JSON (deeper: 400)")
      ->check(CLI::Range(size_t{2}, ortserve::http::kMaxJsonDepthLimit))
      ->capture_default_str();
  app.add_option("--max-tensor-elements", f.max_tensor_elements,
                 "Most elements of one input tensor, HTTP and gRPC, checked from its shape before its "
                 "data is read (more: HTTP 413, gRPC RESOURCE_EXHAUSTED)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--http-idle-timeout-secs", f.http_idle_timeout_secs,
                 "Close a connection that starts no request for this long (also bounds a write to a client "
                 "that does not read)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--http-read-timeout-secs", f.http_read_timeout_secs,
                 "A request must arrive completely (headers and body) within this long of its first byte, "
                 "else its connection is closed (a slow client cannot hold it)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--grpc-port", f.grpc_port, "Port of the KServe v2 gRPC endpoint")
      ->capture_default_str();
  app.add_option("--grpc-address", f.grpc_address, "Address the gRPC endpoint binds to")
      ->capture_default_str();
  app.add_option("--grpc-thread-count", f.grpc_thread_count,
                 "gRPC completion-queue threads (one queue each). They never run inference")
      ->capture_default_str();
  app.add_option("--grpc-max-message-size", f.grpc_max_message_size,
                 "Largest gRPC message sent or received, in bytes")
      ->capture_default_str();
  app.add_option("--metrics-port", f.metrics_port,
                 "Port of the Prometheus endpoint (GET /metrics, text format 0.0.4; see docs/metrics.md)")
      ->capture_default_str();
  app.add_option("--metrics-address", f.metrics_address, "Address the Prometheus endpoint binds to")
      ->capture_default_str();
  app.add_option("--allow-metrics", f.allow_metrics,
                 "false: no Prometheus endpoint (nothing listens on --metrics-port)")
      ->capture_default_str();
  app.add_option("--access-log", f.access_log,
                 "true: one JSON line on stdout per completed HTTP or gRPC ModelInfer request and per "
                 "ModelStreamInfer response (time, request id, model, version, protocol, status, "
                 "queue/compute µs, batch size, bytes in/out)")
      ->capture_default_str();
  app.add_option("--access-log-sample-rate", f.access_log_sample_rate,
                 "Fraction of requests the access log keeps (deterministic: every 1/rate-th)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--trace-otlp-endpoint", f.trace_otlp_endpoint,
                 "http://host[:port][/path] of an OpenTelemetry collector (OTLP/HTTP, JSON; no path: "
                 "/v1/traces). Set: requests are traced (W3C traceparent on HTTP and gRPC ModelInfer) and "
                 "their spans exported from a background thread; unset: no tracing work at all. See "
                 "docs/tracing.md");
  app.add_option("--trace-sample-rate", f.trace_sample_rate,
                 "Fraction of requests without a (valid) traceparent that start a new trace. A traceparent "
                 "decides for its request: sampled flag 1 traced, 0 not")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--trace-buffer-spans", f.trace_buffer_spans,
                 "Spans waiting for export at most; more are dropped (ortserve_trace_spans_dropped_total) "
                 "rather than slowing requests down")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
  app.add_option("--strict-readiness", f.strict_readiness,
                 "true: /v2/health/ready is 200 only when every model in the repository is "
                 "ready; false: once the server is up")
      ->capture_default_str();
  app.add_option("--exit-timeout-secs", f.exit_timeout_secs,
                 "On SIGTERM/SIGINT, how long queued and running requests may take to finish; "
                 "what is left then is answered 503/UNAVAILABLE and the process exits 0")
      ->capture_default_str();
  app.add_option("--thread-budget", f.thread_budget,
                 "Cores the model instances may use in total (0: all cores). Each instance's "
                 "intra-op threads are planned so the sum stays within it unless a config "
                 "sets threads explicitly")
      ->capture_default_str();
  app.add_option("--log-verbose", f.log_verbose, "0: info; 1 and above: debug")
      ->capture_default_str();
  app.add_option("--model-control-mode", f.model_control_mode,
                 "none: load the repository once at startup; poll: also rescan it every "
                 "--repository-poll-secs and load added, reload changed, unload removed models; "
                 "explicit: load only --load-model models at startup, then load/unload through "
                 "the repository API (POST /v2/repository/models/<m>/load|unload, gRPC "
                 "RepositoryModelLoad/Unload)")
      ->check(CLI::IsMember({"none", "poll", "explicit"}))
      ->capture_default_str();
  app.add_option("--repository-poll-secs", f.repository_poll_secs,
                 "poll mode: seconds between two scans of the model repository")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--load-model", f.load_models,
                 "explicit mode: a model to load at startup (repeatable; '*': all). Without it "
                 "explicit mode starts with no model loaded");
  app.add_option("--model-cache-dir", f.model_cache_dir,
                 "Directory for TensorRT engine and timing caches, shared by all instances of a "
                 "model and kept across restarts (empty: <temp dir>/ortserve-model-cache)");

  const std::string groups =
      "health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging";
  app.add_option("--http-restricted-api", f.http_restricted_api,
                 "<group>[,<group>...]:<header>=<value> (repeatable; Triton's syntax). HTTP calls to "
                 "those API groups must carry the header with exactly that value; others stay open. "
                 "Groups: " + groups + ". A refusal says only 'this API is restricted; the request lacks "
                 "valid credentials': 401 when the header is absent, 403 when its value is wrong. "
                 "GET /metrics (--metrics-port) is never restricted");
  app.add_option("--grpc-restricted-protocol", f.grpc_restricted_protocol,
                 "As --http-restricted-api for gRPC: the header is a metadata key (lowercase). Refusals "
                 "are UNAUTHENTICATED (key absent) or PERMISSION_DENIED (wrong value)");
  app.add_option("--allow-unauthenticated-model-control", f.allow_unauthenticated_model_control,
                 "Unlike Triton, ortserve refuses model load/unload (HTTP 403, gRPC PERMISSION_DENIED) "
                 "in --model-control-mode=explicit unless the model-repository group is restricted "
                 "(--http-restricted-api / --grpc-restricted-protocol, per protocol) or this is true. "
                 "The repository index stays open unless restricted")
      ->capture_default_str();
  app.add_option("--http-use-ssl", f.http_use_ssl,
                 "true: the HTTP endpoint speaks HTTPS only (TLS 1.2+), with --http-server-cert/-key")
      ->capture_default_str();
  app.add_option("--http-server-cert", f.http_server_cert, "PEM certificate chain of the HTTPS endpoint");
  app.add_option("--http-server-key", f.http_server_key, "PEM private key (unencrypted) of the HTTPS endpoint");
  app.add_option("--http-root-cert", f.http_root_cert,
                 "PEM CA certificate(s): with --http-use-ssl, require a client certificate signed by "
                 "them (mutual TLS)");
  app.add_option("--grpc-use-ssl", f.grpc_use_ssl,
                 "true: the gRPC endpoint uses TLS with --grpc-server-cert/-key")
      ->capture_default_str();
  app.add_option("--grpc-use-ssl-mutual", f.grpc_use_ssl_mutual,
                 "true: gRPC TLS that also requires a client certificate signed by --grpc-root-cert "
                 "(implies --grpc-use-ssl)")
      ->capture_default_str();
  app.add_option("--grpc-server-cert", f.grpc_server_cert, "PEM certificate chain of the gRPC endpoint");
  app.add_option("--grpc-server-key", f.grpc_server_key, "PEM private key (unencrypted) of the gRPC endpoint");
  app.add_option("--grpc-root-cert", f.grpc_root_cert,
                 "PEM CA certificate(s) that sign client certificates (needed by --grpc-use-ssl-mutual)");
}

// Blocks SIGINT/SIGTERM in every thread (inherited by threads created later)
// so that only the signal-waiting code below sees them.
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  // ONNX Runtime's telemetry off unless the operator asks for it (set
  // ORT_DISABLE_TELEMETRY=0); set while the process has one thread.
  setenv("ORT_DISABLE_TELEMETRY", "1", /*overwrite=*/0);
  CLI::App app{"ortserve: a KServe v2 / Triton-compatible inference server for ONNX models"};
  app.set_version_flag("--version", std::string("ortserve ") + ORTSERVE_VERSION);
  Flags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);

  spdlog::set_level(flags.log_verbose > 0 ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %v");
  const sigset_t signals = BlockShutdownSignals();

  const std::string malloc_name = ortserve::MallocName();  // logged here, labelled in ortserve_build_info
  spdlog::info("ortserve {} with ONNX Runtime {}, malloc: {}", ORTSERVE_VERSION, ortserve::OrtVersion(),
               malloc_name);

  const ortserve::ModelControlMode control_mode =
      flags.model_control_mode == "explicit" ? ortserve::ModelControlMode::kExplicit
      : flags.model_control_mode == "poll"   ? ortserve::ModelControlMode::kPoll
                                             : ortserve::ModelControlMode::kNone;
  if (!flags.load_models.empty() && control_mode != ortserve::ModelControlMode::kExplicit) {
    spdlog::critical("--load-model needs --model-control-mode=explicit (in mode '{}' every model loads)",
                     flags.model_control_mode);
    return 1;
  }
  auto repository = ortserve::ModelRepository::Create(
      {.repository_path = flags.model_repository,
       .thread_budget = flags.thread_budget,
       .control_mode = control_mode,
       .poll_interval = std::chrono::seconds(flags.repository_poll_secs),
       .startup_models = flags.load_models,
       .model_cache_dir = flags.model_cache_dir});
  if (!repository.ok()) {
    spdlog::critical("{}", repository.status().message());
    return 1;
  }

  ortserve::AccessLogSink access_log;
  if (flags.access_log) {
    auto log = std::make_shared<ortserve::metrics::AccessLog>(flags.access_log_sample_rate);
    access_log = [log](const ortserve::AccessLogRecord& record) { log->Write(record); };
  }

  // Tracing: one exporter thread; the tracer is shared by both front ends.
  std::shared_ptr<ortserve::tracing::OtlpExporter> trace_exporter;
  std::shared_ptr<const ortserve::tracing::RequestTracer> tracer;
  if (!flags.trace_otlp_endpoint.empty()) {
    auto exporter = ortserve::tracing::OtlpExporter::Create(
        {.endpoint = flags.trace_otlp_endpoint,
         .buffer_spans = flags.trace_buffer_spans,
         .resource = {.service_name = "ortserve", .service_version = ORTSERVE_VERSION}});
    if (!exporter.ok()) {
      spdlog::critical("{}", exporter.status().message());
      return 1;
    }
    trace_exporter = std::move(exporter).value();
    tracer = std::make_shared<const ortserve::tracing::RequestTracer>(trace_exporter, flags.trace_sample_rate);
    spdlog::info("tracing: spans are sent to {} (OTLP/HTTP JSON, POST {}); requests without a traceparent "
                 "are sampled at {}; at most {} spans wait for export",
                 flags.trace_otlp_endpoint, trace_exporter->endpoint().target, flags.trace_sample_rate,
                 flags.trace_buffer_spans);
  }

  auto http_policy = ortserve::auth::AccessPolicy::Parse(flags.http_restricted_api, "--http-restricted-api");
  if (!http_policy.ok()) {
    spdlog::critical("{}", http_policy.status().message());
    return 1;
  }
  auto grpc_policy =
      ortserve::auth::AccessPolicy::Parse(flags.grpc_restricted_protocol, "--grpc-restricted-protocol");
  if (!grpc_policy.ok()) {
    spdlog::critical("{}", grpc_policy.status().message());
    return 1;
  }
  if (!flags.http_use_ssl && (!flags.http_server_cert.empty() || !flags.http_server_key.empty() ||
                              !flags.http_root_cert.empty())) {
    spdlog::critical("--http-server-cert/--http-server-key/--http-root-cert need --http-use-ssl=true");
    return 1;
  }
  if (!flags.grpc_use_ssl && !flags.grpc_use_ssl_mutual &&
      (!flags.grpc_server_cert.empty() || !flags.grpc_server_key.empty() || !flags.grpc_root_cert.empty())) {
    spdlog::critical("--grpc-server-cert/--grpc-server-key/--grpc-root-cert need --grpc-use-ssl=true");
    return 1;
  }

  ortserve::HttpServerOptions http_options;
  http_options.access_policy = std::make_shared<const ortserve::auth::AccessPolicy>(std::move(*http_policy));
  http_options.allow_unauthenticated_model_control = flags.allow_unauthenticated_model_control;
  http_options.tls = {.enabled = flags.http_use_ssl,
                      .server_cert_file = flags.http_server_cert,
                      .server_key_file = flags.http_server_key,
                      .root_cert_file = flags.http_root_cert};
  http_options.address = flags.http_address;
  http_options.port = flags.http_port;
  http_options.io_threads = flags.http_thread_count > 0 ? flags.http_thread_count : DefaultHttpThreads();
  http_options.max_input_size = flags.http_max_input_size;
  http_options.strict_readiness = flags.strict_readiness;
  http_options.server_version = ORTSERVE_VERSION;
  http_options.max_header_bytes = flags.http_max_header_size;
  http_options.max_body_chunks = flags.http_max_body_chunks;
  http_options.max_connections = flags.http_max_connections;
  http_options.max_json_depth = flags.http_max_json_depth;
  http_options.max_tensor_elements = flags.max_tensor_elements;
  http_options.idle_timeout = std::chrono::seconds(flags.http_idle_timeout_secs);
  http_options.read_timeout = std::chrono::seconds(flags.http_read_timeout_secs);
  http_options.access_log = access_log;
  http_options.tracer = tracer;
  auto http = ortserve::HttpServer::Create(http_options, repository->get());
  if (!http.ok()) {
    spdlog::critical("{}", http.status().message());
    return 1;
  }

  ortserve::GrpcServerOptions grpc_options;
  grpc_options.access_policy = std::make_shared<const ortserve::auth::AccessPolicy>(std::move(*grpc_policy));
  grpc_options.allow_unauthenticated_model_control = flags.allow_unauthenticated_model_control;
  grpc_options.tls = {.enabled = flags.grpc_use_ssl || flags.grpc_use_ssl_mutual,
                      .mutual = flags.grpc_use_ssl_mutual,
                      .server_cert_file = flags.grpc_server_cert,
                      .server_key_file = flags.grpc_server_key,
                      .root_cert_file = flags.grpc_root_cert};
  grpc_options.address = flags.grpc_address;
  grpc_options.port = flags.grpc_port;
  grpc_options.completion_queue_threads = flags.grpc_thread_count;
  grpc_options.max_message_bytes = flags.grpc_max_message_size;
  grpc_options.max_tensor_elements = flags.max_tensor_elements;
  grpc_options.strict_readiness = flags.strict_readiness;
  grpc_options.server_version = ORTSERVE_VERSION;
  grpc_options.access_log = access_log;
  grpc_options.tracer = tracer;
  auto grpc = ortserve::GrpcServer::Create(grpc_options, repository->get());
  if (!grpc.ok()) {
    spdlog::critical("{}", grpc.status().message());
    return 1;
  }

  // Models load before the port opens so that a client never sees a model
  // missing that is merely still loading; liveness follows the port.
  (*repository)->LoadAll();
  if (auto st = (*http)->Start(); !st.ok()) {
    spdlog::critical("{}", st.message());
    return 1;
  }
  spdlog::info("HTTP KServe v2 endpoint listening on {}:{} ({} I/O threads{})", flags.http_address,
               (*http)->port(), http_options.io_threads,
               !flags.http_use_ssl            ? ""
               : flags.http_root_cert.empty() ? ", HTTPS"
                                              : ", HTTPS with client certificates");
  if (auto st = (*grpc)->Start(); !st.ok()) {
    spdlog::critical("{}", st.message());
    return 1;
  }
  spdlog::info("gRPC KServe v2 endpoint listening on {}:{} ({} completion-queue threads)",
               flags.grpc_address, (*grpc)->port(), grpc_options.completion_queue_threads);

  std::unique_ptr<ortserve::metrics::MetricsServer> metrics;
  if (flags.allow_metrics) {
    std::string providers;
    for (const std::string& p : ortserve::AvailableExecutionProviders()) {
      providers += (providers.empty() ? "" : ",") + p;
    }
    auto collector = std::make_shared<ortserve::metrics::MetricsCollector>(ortserve::metrics::MetricsSources{
        .repository = repository->get(),
        .version = ORTSERVE_VERSION,
        .onnxruntime_version = ortserve::OrtVersion(),
        .execution_providers = providers,
        .allocator = malloc_name,
        .http_open_connections = [h = http->get()] { return h->OpenConnections(); },
        .http_rejected_connections = [h = http->get()] { return h->RejectedConnections(); },
        .grpc_active_calls = [g = grpc->get()] { return g->ActiveCalls(); },
        .trace_export = trace_exporter ? std::function<ortserve::tracing::TraceExportCounters()>(
                                             [e = trace_exporter] { return e->counters(); })
                                       : nullptr});
    auto created = ortserve::metrics::MetricsServer::Create(
        {.address = flags.metrics_address, .port = flags.metrics_port},
        [collector] { return collector->Render(); });
    if (!created.ok()) {
      spdlog::critical("{}", created.status().message());
      return 1;
    }
    metrics = std::move(created).value();
    if (auto st = metrics->Start(); !st.ok()) {
      spdlog::critical("{}", st.message());
      return 1;
    }
    spdlog::info("Prometheus metrics endpoint listening on {}:{}/metrics", flags.metrics_address,
                 metrics->port());
  } else {
    spdlog::info("Prometheus metrics endpoint disabled (--allow-metrics=false)");
  }

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}, shutting down (up to {} s for in-flight requests; a second signal "
               "exits at once)",
               sig == SIGINT ? "SIGINT" : "SIGTERM", flags.exit_timeout_secs);

  // A second signal during the drain exits immediately.
  std::thread second_signal([signals] {
    int again = 0;
    sigwait(&signals, &again);
    std::_Exit(1);
  });
  second_signal.detach();

  // Both front ends stop taking requests (503 / UNAVAILABLE, not ready) but
  // keep their connections, so that every request already accepted gets its
  // answer: the models compute what is queued or running until the exit
  // timeout, then answer what is left with 503 (stopping running batches).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(flags.exit_timeout_secs);
  (*http)->StopAccepting();
  (*grpc)->StopAccepting();
  (*repository)->Shutdown(deadline);
  // Every request is answered now; the front ends get a short grace to write
  // the answers before they close (idle gRPC streams are cancelled).
  constexpr auto kWriteGrace = std::chrono::seconds(2);
  (*grpc)->Stop(kWriteGrace);
  (*http)->WaitForInFlight(kWriteGrace);
  // Scrapes keep working while requests drain.
  if (metrics) metrics->Stop();
  (*http)->Stop();
  // Every request is answered now: what tracing buffered gets a bounded
  // chance to reach the collector (plus an export already under way).
  if (trace_exporter) trace_exporter->Shutdown(std::chrono::seconds(5));
  spdlog::info("shutdown complete");
  return 0;
}
