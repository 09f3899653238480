#include "app/Flags.h"

#include <chrono>

#include "repository/MemoryBudget.h"
#include "repository/ModelSigning.h"

namespace ortserve::app {
namespace {

// The HTTP endpoint, its limits and timeouts (and the tensor limit both front ends apply).
void AddHttpFlags(CLI::App& app, Flags& f) {
  app.add_option("--http-port", f.http_port, "Port of the KServe v2 HTTP endpoint")
      ->capture_default_str();
  app.add_option("--http-address", f.http_address, "Address the HTTP endpoint binds to")
      ->capture_default_str();
  app.add_option("--http-thread-count", f.http_thread_count,
                 "HTTP I/O threads (0: 1 when the process may use under 4 CPUs, 2 for 4-7, 4 for 8+). "
                 "They run inference only for a cheap model's request from a thread's lone connection (inline runs)")
      ->capture_default_str();
  app.add_option("--http-max-input-size", f.http_max_input_size,
                 "Largest request body accepted, in bytes, also after decompression")
      ->capture_default_str();
  app.add_option("--http-max-header-size", f.http_max_header_size,
                 "Largest request line + headers, in bytes (more: 431)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--http-max-body-chunks", f.http_max_body_chunks,
                 "Most chunks in one chunked request body (more: 400, as Triton)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 32))
      ->capture_default_str();
  app.add_option("--http-max-connections", f.http_max_connections,
                 "Most HTTP client connections open at once. One more is answered 503 at once (HTTPS: "
                 "closed) and counted in ortserve_connections_rejected_total{protocol=\"http\"}")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--http-max-json-depth", f.http_max_json_depth,
                 "Deepest nesting of objects and arrays in an infer request's JSON (deeper: 400). "
                 "Each input's 'data' is also held to Triton's limit of 100 nested arrays")
      ->check(CLI::Range(size_t{2}, http::kMaxJsonDepthLimit))
      ->capture_default_str();
  app.add_option("--max-tensor-elements", f.max_tensor_elements,
                 "Most elements of one input tensor, HTTP and gRPC, checked from its shape before its "
                 "data is read (more: HTTP 400, gRPC RESOURCE_EXHAUSTED)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-shm-regions", f.max_shm_regions,
                 "Most system shared memory regions registered at once, for the whole server (one more: HTTP 503, "
                 "gRPC UNAVAILABLE); registration needs --allow-client-shm=true (docs/shared-memory.md)")
      ->check(CLI::Range(size_t{1}, size_t{4096}))
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
}

// The gRPC endpoint.
void AddGrpcFlags(CLI::App& app, Flags& f) {
  app.add_option("--grpc-port", f.grpc_port, "Port of the KServe v2 gRPC endpoint")
      ->capture_default_str();
  app.add_option("--grpc-address", f.grpc_address,
                 "Address the gRPC endpoint binds to: an IP address, or a host name (every address it resolves to)")
      ->capture_default_str();
  app.add_option("--grpc-thread-count", f.grpc_thread_count,
                 "gRPC completion-queue threads (one queue each). They never run inference")
      ->capture_default_str();
  app.add_option("--grpc-max-message-size", f.grpc_max_message_size,
                 "Largest gRPC message sent or received, in bytes")
      ->capture_default_str();
  app.add_option("--grpc-max-concurrent-streams", f.grpc_max_concurrent_streams,
                 "Most calls (HTTP/2 streams) one gRPC connection may have open at once; a client queues "
                 "more on its side. Triton sets no limit; 128 is above what its clients open on one connection")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--grpc-max-connections", f.grpc_max_connections,
                 "Most gRPC client connections open at once (the HTTP port's default), plaintext or TLS "
                 "(--grpc-use-ssl). One more is closed at once, unanswered (its client sees UNAVAILABLE), and "
                 "counted in ortserve_connections_rejected_total{protocol=\"grpc\"} (docs/limits.md)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--grpc-max-buffered-bytes", f.grpc_max_buffered_bytes,
                 "Memory the gRPC library may hold for the whole server, in bytes: messages being received "
                 "and the transport's buffers (a grpc::ResourceQuota). Near it gRPC grants clients smaller "
                 "windows, then closes idle connections and cancels calls, so unfinished messages cannot grow the "
                 "server without bound (a soft bound: RSS peaks at up to about twice it, docs/limits.md). At least "
                 "--grpc-max-message-size")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 40))
      ->capture_default_str();
}

// Prometheus metrics, the access log and tracing.
void AddObservabilityFlags(CLI::App& app, Flags& f) {
  app.add_option("--metrics-port", f.metrics_port,
                 "Port of the Prometheus endpoint (GET /metrics, text format 0.0.4; see docs/metrics.md)")
      ->capture_default_str();
  app.add_option("--metrics-address", f.metrics_address, "Address the Prometheus endpoint binds to")
      ->capture_default_str();
  app.add_option("--allow-metrics", f.allow_metrics,
                 "false: no Prometheus endpoint (nothing listens on --metrics-port)")
      ->capture_default_str();
  app.add_option("--metrics-max-connections", f.metrics_max_connections,
                 "Most connections open at once on --metrics-port; one more is closed at once, unanswered, so "
                 "that idle connections there cannot take the descriptors the inference ports need. Idle "
                 "connections close after 30 s, and a request must arrive within 10 s of its first byte")
      ->check(CLI::Range(size_t{1}, size_t{1} << 16))
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
                 "Fraction of requests without a (valid) traceparent that start a new trace: 1 of every "
                 "round(1/fraction), Triton's trace_rate (0: none). A traceparent decides for its request: "
                 "sampled flag 1 traced, 0 not. Rate, level and count change at run time through Triton's "
                 "trace extension (/v2/trace/setting, per model too)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--trace-buffer-spans", f.trace_buffer_spans,
                 "Spans waiting for export at most; more are dropped (ortserve_trace_spans_dropped_total) "
                 "rather than slowing requests down")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
}

// Readiness, shutdown and the thread budget.
void AddServingFlags(CLI::App& app, Flags& f) {
  app.add_option("--strict-readiness", f.strict_readiness,
                 "true: /v2/health/ready is 200 only when every model in the repository is "
                 "ready; false: once the server is up")
      ->capture_default_str();
  app.add_option("--exit-on-error", f.exit_on_error,
                 "true: exit (status 1) after the startup load when any model failed to load, as "
                 "Triton does by default; false: serve the models that loaded, the failed ones "
                 "UNAVAILABLE with their reason (docs/triton-differences.md)")
      ->capture_default_str();
  app.add_option("--exit-timeout-secs", f.exit_timeout_secs,
                 "On SIGTERM/SIGINT, how long queued and running requests may take to finish; "
                 "what is left then is answered 503/UNAVAILABLE and the process exits 0")
      ->capture_default_str();
  app.add_option("--drain-delay-secs", f.drain_delay_secs,
                 "On SIGTERM/SIGINT, first report not ready (HTTP /v2/health/ready, gRPC ServerReady) "
                 "and keep serving for this long, so that load balancers whose health checks poll "
                 "stop sending before new requests are refused; then --exit-timeout-secs applies. "
                 "On Kubernetes the chart's preStop pause does this instead (docs/deploy.md)")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  app.add_option("--thread-budget", f.thread_budget,
                 "Cores the model instances may use in total (0: the CPUs this process may use: its "
                 "CPU affinity and its cgroup's CPU quota, cgroup v2 cpu.max or v1 cfs_quota_us, rounded "
                 "down; the startup log names the source). Each instance's intra-op threads are planned "
                 "so the sum stays within it unless a config sets threads explicitly")
      ->capture_default_str();
  app.add_option("--ort-thread-pool", f.ort_thread_pool,
                 "shared: every model runs on one ONNX Runtime intra-op pool of --thread-budget threads "
                 "(budget - 1 threads named ort-pool-N plus the calling thread), however many models are "
                 "loaded; a model whose runs get one thread (budget / instances = 1) computes on its calling "
                 "thread alone, and a model keeps pools of its own when its config asks (intra_op_thread_count, "
                 "execution_mode 1, allow_spinning 1 or ort_thread_pool own; docs/model-config.md). "
                 "per-session: every instance gets pools of its own (ORT's default)")
      ->check(CLI::IsMember({"shared", "per-session"}))
      ->capture_default_str();
}

// The server log, as Triton's logging flags.
void AddLogFlags(CLI::App& app, Flags& f) {
  app.add_option("--log-verbose", f.log_verbose,
                 "Verbose log level (Triton's): 0 none; 1 ortserve's debug lines; 2 and above also its trace "
                 "lines (one per HTTP request). Changed at run time through /v2/logging (log_verbose_level)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--log-info", f.log_info, "Log INFO lines (as Triton's; changed at run time through /v2/logging)")
      ->capture_default_str();
  app.add_option("--log-warning", f.log_warning, "Log WARNING lines (as Triton's; also at run time)")
      ->capture_default_str();
  app.add_option("--log-error", f.log_error, "Log ERROR lines (as Triton's; also at run time)")
      ->capture_default_str();
  app.add_option("--log-format", f.log_format,
                 "Log line layout, in UTC; also at run time. Triton's: default (I1202 05:30:26.123456 <pid>] "
                 "msg) or ISO8601 (2026-12-02T05:30:26Z I <pid>] msg); or json: one JSON object per line "
                 "(time with microseconds, level, thread, message; a request's lines also model, version, "
                 "request_id, and trace_id/span_id when traced), and --access-log lines in the same schema")
      ->check(CLI::IsMember({"default", "ISO8601", "json"}))
      ->capture_default_str();
  app.add_option("--log-file", f.log_file,
                 "Write the server log to this file (appended to) instead of standard output; it cannot change "
                 "at run time. The access log (--access-log) stays on standard output");
}

// Which models load and how: model control, the model cache, op libraries.
void AddModelFlags(CLI::App& app, Flags& f) {
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
  app.add_option("--model-load-on-demand", f.model_load_on_demand,
                 "true: list the repository's models but load each on its first infer request (that request "
                 "and those arriving during the load wait, up to --model-load-wait-secs; after a failed load, "
                 "requests get its error without a new load for 2 s, doubling per failure to 60 s, until the "
                 "model's files change or it is loaded explicitly). With none or poll "
                 "nothing loads at startup (poll keeps the loaded models in sync with the repository); with "
                 "explicit --load-model models load at startup and load/unload stay available")
      ->capture_default_str();
  app.add_option("--model-load-wait-secs", f.model_load_wait_secs,
                 "--model-load-on-demand: the longest a request waits for its model's load (503 / UNAVAILABLE "
                 "after it; the load goes on)")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--model-memory-budget", f.model_memory_budget,
                 "Bytes (K, M, G suffixes: KiB, MiB, GiB) the loaded model versions may hold together, each "
                 "costed at 1.25 x its version folder's bytes plus 384 KiB (ortserve_model_memory_bytes). A load that "
                 "would exceed it first unloads the least recently used idle models; pinned models (parameter "
                 "pinned \"true\", --load-model), models with requests or open sequences, and composing models of "
                 "an ensemble in use stay. When nothing can go, the load fails with 503 / UNAVAILABLE naming the "
                 "budget. Evicted models reload on their next request with --model-load-on-demand; without it "
                 "they stay unloaded. 0: no budget")
      ->capture_default_str();
  app.add_option("--model-cache-dir", f.model_cache_dir,
                 "Directory for TensorRT engine and timing caches, shared by all instances of a "
                 "model and kept across restarts (empty: <temp dir>/ortserve-model-cache). When set, CPU "
                 "models also keep their ONNX Runtime-optimized graphs in <dir>/optimized, so that later "
                 "loads skip the graph optimizations (a corrupt or stale entry is rebuilt)");
  app.add_option("--op-library", f.op_libraries,
                 "Custom-operator shared library (exporting RegisterCustomOps) registered in the "
                 "session options of every ONNX model, before the model's own "
                 "model_operations.op_library_filename (repeatable). The path goes to dlopen as "
                 "given; a library that cannot be registered fails the load of each model, "
                 "naming the library and why");
  app.add_option("--model-signature-policy", f.model_signature_policy,
                 "Check each model version against its OpenSSF model-signing signature (model.sig in the "
                 "version's or the model's folder, docs/signing.md) before it loads. off: no check; warn: "
                 "load and log a failure; require: a missing or failing signature leaves the version "
                 "UNAVAILABLE with the reason")
      ->check(CLI::IsMember({"off", "warn", "require"}))
      ->capture_default_str();
  app.add_option("--model-signing-public-key", f.model_signing_public_keys,
                 "PEM public key (ECDSA P-256/P-384/P-521 or Ed25519) model signatures may be made with "
                 "(repeatable; key-based signing: `model_signing sign key`; read at startup: a changed "
                 "file takes effect at restart). Keyless Sigstore signatures are not supported");
  app.add_option("--model-signing-certificate-chain", f.model_signing_certificate_chains,
                 "PEM file of trusted certificates (a CA, intermediates) a certificate-based model signature's "
                 "chain must lead to (repeatable; `model_signing sign certificate`; read at startup)");
}

// Restricted APIs and TLS for both endpoints.
void AddSecurityFlags(CLI::App& app, Flags& f) {
  const std::string groups =
      "health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging";
  app.add_option("--http-restricted-api", f.http_restricted_api,
                 "<group>[,<group>...]:<key>=<value> (repeatable; Triton's syntax). HTTP calls to "
                 "those API groups must carry the header <key> with exactly that value; others stay open. "
                 "Groups: " + groups + ". A refusal says \"This API is restricted, expecting header "
                 "'<key>'\" (never the value): 401 when the header is absent, 403 when its value is wrong. "
                 "GET /metrics (--metrics-port) is never restricted");
  app.add_option("--grpc-restricted-protocol", f.grpc_restricted_protocol,
                 "As --http-restricted-api for gRPC, as Triton: calls carry the metadata key "
                 "triton-grpc-protocol-<key> (tritonclient: headers={'triton-grpc-protocol-<key>': ...}). Refusals "
                 "say \"This protocol is restricted, expecting header 'triton-grpc-protocol-<key>'\": "
                 "UNAUTHENTICATED (key absent) or PERMISSION_DENIED (wrong value)");
  app.add_option("--http-restricted-api-file", f.http_restricted_api_files,
                 "<group>[,<group>...]:<key>=<file> (repeatable): as --http-restricted-api with the value "
                 "read from <file> (one line; a trailing newline is dropped), e.g. a mounted Kubernetes "
                 "Secret, so that it is not visible in the process list");
  app.add_option("--grpc-restricted-protocol-file", f.grpc_restricted_protocol_files,
                 "<group>[,<group>...]:<key>=<file> (repeatable): as --grpc-restricted-protocol with the "
                 "value read from <file>");
  app.add_option("--allow-unauthenticated-model-control", f.allow_unauthenticated_model_control,
                 "Unlike Triton, ortserve refuses model load/unload (HTTP 403, gRPC PERMISSION_DENIED) "
                 "in --model-control-mode=explicit unless the model-repository group is restricted "
                 "(--http-restricted-api / --grpc-restricted-protocol, per protocol) or this is true. "
                 "The repository index stays open unless restricted")
      ->capture_default_str();
  app.add_option("--client-quota-config", f.client_quota_config,
                 "JSON file of per-client rate (token bucket: requests/s and burst) and in-flight limits, "
                 "client-wide and per model (docs/limits.md, Quotas). A request over its client's quota is "
                 "refused at admission, before any model queue: HTTP 429 with Retry-After, gRPC "
                 "RESOURCE_EXHAUSTED. Reread on SIGHUP (a bad file keeps the old limits). Empty: no quotas");
  app.add_option("--client-id-header", f.client_id_header,
                 "With --client-quota-config: the HTTP header (gRPC metadata key, lowercase) whose value "
                 "identifies the client; without it, or when a request lacks it, the client is the peer's IP "
                 "address");
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

}  // namespace

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--model-repository", f.model_repository,
                 "Path of the model repository (Triton layout: <model>/<version>/model.onnx "
                 "and optional <model>/config.pbtxt)")
      ->required();
  app.add_option("--single-model-name", f.single_model_name,
                 "When --model-repository holds one model's own files (model.onnx or another single .onnx, "
                 "config.pbtxt, numeric version directories) instead of model directories, serve it under "
                 "this name (KServe's /mnt/models; its ServingRuntime passes the InferenceService's name). "
                 "A Triton-style repository is served as it is");
  AddHttpFlags(app, f);
  AddGrpcFlags(app, f);
  AddObservabilityFlags(app, f);
  AddServingFlags(app, f);
  AddLogFlags(app, f);
  AddModelFlags(app, f);
  AddSecurityFlags(app, f);
  AddTritonFlags(app, f.triton);
}

Result<RepositoryOptions> RepositoryOptionsFrom(const Flags& flags, const TritonSettings& triton) {
  const ModelControlMode control_mode = flags.model_control_mode == "explicit" ? ModelControlMode::kExplicit
                                        : flags.model_control_mode == "poll"   ? ModelControlMode::kPoll
                                                                               : ModelControlMode::kNone;
  if (!flags.load_models.empty() && control_mode != ModelControlMode::kExplicit) {
    return InvalidArgument("--load-model needs --model-control-mode=explicit (in mode '" + flags.model_control_mode +
                           "' every model loads)");
  }
  Result<uint64_t> memory_budget = ParseByteSize(flags.model_memory_budget);
  if (!memory_budget.ok()) return InvalidArgument("--model-memory-budget: " + memory_budget.status().message());
  ModelSigningOptions signing{.policy = ParseSignaturePolicy(flags.model_signature_policy).value(),
                              .public_key_files = flags.model_signing_public_keys,
                              .certificate_chain_files = flags.model_signing_certificate_chains,
                              .keys = nullptr};
  if (signing.policy != SignaturePolicy::kOff) {
    if (flags.model_signing_public_keys.empty() && flags.model_signing_certificate_chains.empty()) {
      return InvalidArgument("--model-signature-policy=" + flags.model_signature_policy +
                             " needs at least one --model-signing-public-key or --model-signing-certificate-chain");
    }
    ORTSERVE_RETURN_IF_ERROR(LoadSigningKeys(&signing));  // once: every check uses them
  }
  return RepositoryOptions{.repository_path = flags.model_repository,
                           .thread_budget = flags.thread_budget,
                           .shared_thread_pool = flags.ort_thread_pool == "shared",
                           .control_mode = control_mode,
                           .poll_interval = std::chrono::seconds(flags.repository_poll_secs),
                           .startup_models = flags.load_models,
                           .model_cache_dir = flags.model_cache_dir,
                           .response_cache_bytes = triton.response_cache_bytes,
                           .auto_complete = triton.auto_complete,
                           .op_libraries = flags.op_libraries,
                           .session_config_entries = triton.session_config_entries,
                           .signing = std::move(signing),
                           .load_on_demand = flags.model_load_on_demand,
                           .load_wait = std::chrono::seconds(flags.model_load_wait_secs),
                           .memory_budget = memory_budget.value()};
}

int DefaultHttpThreads(int cpus) {
  // HTTP threads only parse and encode (~10 us of CPU for a small request),
  // so a few keep up with the models and leave the cores to inference. Under
  // 4 cores one is the default: it serves ~100k small requests/s, more than
  // any real model computes there. A second one raises a no-op-sized model's
  // throughput there but takes turns with the model's threads and the clients
  // on the same cores, and the tail latency and the rate of other loads
  // suffer more than that gains.
  if (cpus < 4) return 1;
  return cpus >= 8 ? 4 : 2;
}

}  // namespace ortserve::app
