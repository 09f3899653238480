// ortserve: serves a Triton-layout repository of ONNX models over KServe v2.
// main() parses flags (Flags.cpp), wires the layers together and owns the
// shutdown order: stop accepting → drain in-flight requests → stop
// schedulers → stop I/O.
#include <cctype>
#include <chrono>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <pthread.h>
#include <string>
#include <string_view>
#include <thread>
#include <unistd.h>
#include <utility>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "app/CheckCommand.h"
#include "app/CpuBudget.h"
#include "app/DescriptorLimit.h"
#include "app/Flags.h"
#include "app/SecretFiles.h"
#include "app/SingleModelLayout.h"
#include "core/MallocName.h"
#include "repository/ModelRepository.h"
#include "runtime/OrtModelInstance.h"
#include "server/common/ClientQuotas.h"
#include "server/common/SharedMemoryRegistry.h"
#include "server/common/LogControl.h"
#include "server/common/RuntimeSettings.h"
#include "server/grpc/GrpcServer.h"
#include "server/http/HttpServer.h"
#include "server/metrics/AccessLog.h"
#include "server/metrics/MetricsCollector.h"
#include "server/metrics/MetricsServer.h"
#include "server/tracing/OtlpExporter.h"
#include "server/tracing/RequestTracer.h"

namespace ortserve::app {
namespace {

common::LogSettings LogSettingsFrom(const Flags& flags) {
  return {.file = flags.log_file,
          .info = flags.log_info,
          .warning = flags.log_warning,
          .error = flags.log_error,
          .verbose_level = static_cast<uint32_t>(flags.log_verbose),
          .format = common::ParseLogFormat(flags.log_format).value_or(common::LogFormat::kDefault)};
}

// Blocks SIGINT/SIGTERM (and SIGHUP, which rereads the client quota file,
// when there is one) in every thread (inherited by threads created later) so
// that only the signal-waiting code below sees them. Returns the shutdown
// signals.
sigset_t BlockSignals(bool reload_on_hup) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigset_t blocked = set;
  if (reload_on_hup) sigaddset(&blocked, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
  return set;
}

// --client-quota-config, read at start and on SIGHUP; null without the flag.
Result<std::shared_ptr<common::ClientQuotas>> MakeQuotas(const Flags& flags) {
  if (flags.client_quota_config.empty()) return std::shared_ptr<common::ClientQuotas>();
  auto config = common::QuotaConfig::Load(flags.client_quota_config);
  if (!config.ok()) return config.status();
  spdlog::info("client quotas from {} (client id: {})", flags.client_quota_config,
               flags.client_id_header.empty() ? "the peer address" : "header " + flags.client_id_header);
  return std::make_shared<common::ClientQuotas>(std::move(config).value());
}

void ReloadQuotas(const Flags& flags, common::ClientQuotas* quotas) {
  auto config = common::QuotaConfig::Load(flags.client_quota_config);
  if (!config.ok()) {
    spdlog::error("SIGHUP: client quotas unchanged: {}", config.status().message());
    return;
  }
  quotas->Reload(std::move(config).value());
  spdlog::info("SIGHUP: client quotas reloaded from {}", flags.client_quota_config);
}

Result<std::unique_ptr<ModelRepository>> MakeRepository(const Flags& flags, const TritonSettings& triton) {
  auto options = RepositoryOptionsFrom(flags, triton);
  if (!options.ok()) return options.status();
  return ModelRepository::Create(std::move(options).value());
}

// --thread-budget 0 becomes the CPUs this process may use (CpuBudget.h);
// the log says where the number comes from.
void ResolveThreadBudget(Flags& flags) {
  if (flags.thread_budget > 0) {
    spdlog::info("thread budget: {} CPUs (--thread-budget)", flags.thread_budget);
    return;
  }
  const CpuBudget budget = DetectCpuBudget();
  flags.thread_budget = budget.cpus;
  spdlog::info("thread budget: {} CPUs (from {})", budget.cpus, budget.source);
}

// Raises the soft descriptor limit to the hard one, logs both, and warns when
// the connection limits do not fit in what the process got.
void RaiseAndCheckDescriptorLimit(const Flags& flags) {
  const DescriptorLimit limit = RaiseDescriptorLimit();
  const auto shown = [](uint64_t n) {
    return n == std::numeric_limits<uint64_t>::max() ? std::string("unlimited") : std::to_string(n);
  };
  if (!limit.error.empty()) {
    spdlog::warn("descriptor limit (RLIMIT_NOFILE): soft {}, hard {}; raising the soft limit failed: {}",
                 shown(limit.soft), shown(limit.hard), limit.error);
  } else if (limit.soft != limit.soft_before) {
    spdlog::info("descriptor limit (RLIMIT_NOFILE): soft {} (raised from {}), hard {}", shown(limit.soft),
                 shown(limit.soft_before), shown(limit.hard));
  } else {
    spdlog::info("descriptor limit (RLIMIT_NOFILE): soft {}, hard {}", shown(limit.soft), shown(limit.hard));
  }
  const uint64_t connections = flags.http_max_connections + flags.grpc_max_connections +
                               (flags.allow_metrics ? flags.metrics_max_connections : 0);
  if (auto warning = ConnectionLimitWarning(connections, limit.soft)) spdlog::warn("{}", *warning);
}

// What both front ends report completed requests to.
struct Observability {
  AccessLogSink access_log;
  // Triton's trace settings, changed at run time through both front ends.
  std::shared_ptr<tracing::TraceSettings> trace_settings;
  // Tracing: one exporter thread; the tracer is shared by both front ends.
  std::shared_ptr<tracing::OtlpExporter> trace_exporter;
  std::shared_ptr<const tracing::RequestTracer> tracer;
};

Result<Observability> MakeObservability(const Flags& flags) {
  Observability o;
  if (flags.access_log) {
    auto log = std::make_shared<metrics::AccessLog>(flags.access_log_sample_rate, flags.log_format == "json");
    o.access_log = [log](const AccessLogRecord& record) { log->Write(record); };
  }
  const tracing::TraceSettingValues trace_defaults{
      .level = flags.trace_otlp_endpoint.empty() ? tracing::kTraceLevelOff : tracing::kTraceLevelTimestamps,
      .rate = tracing::TraceSettings::RateForFraction(flags.trace_sample_rate)};
  o.trace_settings = std::make_shared<tracing::TraceSettings>(trace_defaults, !flags.trace_otlp_endpoint.empty(),
                                                              flags.trace_otlp_endpoint);
  if (flags.trace_otlp_endpoint.empty()) return o;
  auto exporter = tracing::OtlpExporter::Create(
      {.endpoint = flags.trace_otlp_endpoint,
       .buffer_spans = flags.trace_buffer_spans,
       .resource = {.service_name = "ortserve", .service_version = ORTSERVE_VERSION}});
  if (!exporter.ok()) return exporter.status();
  o.trace_exporter = std::move(exporter).value();
  o.tracer = std::make_shared<const tracing::RequestTracer>(o.trace_exporter, o.trace_settings);
  spdlog::info("tracing: spans are sent to {} (OTLP/HTTP JSON, POST {}); 1 of every {} requests without a "
               "traceparent is traced (trace_rate); at most {} spans wait for export",
               flags.trace_otlp_endpoint, o.trace_exporter->endpoint().target, trace_defaults.rate,
               flags.trace_buffer_spans);
  return o;
}

struct AccessPolicies {
  auth::AccessPolicy http;
  auth::AccessPolicy grpc;
};

// A restriction flag's specs plus those of its -file twin, values read.
Result<std::vector<std::string>> RestrictionSpecs(std::vector<std::string> inline_specs,
                                                  const std::vector<std::string>& file_specs,
                                                  const std::string& file_flag) {
  auto from_files = ResolveRestrictionFiles(file_specs, file_flag);
  if (!from_files.ok()) return from_files.status();
  inline_specs.insert(inline_specs.end(), from_files->begin(), from_files->end());
  return inline_specs;
}

// Both restricted-API policies, after checking that TLS files come with TLS.
Result<AccessPolicies> ParseAccessFlags(const Flags& flags) {
  auto http_specs =
      RestrictionSpecs(flags.http_restricted_api, flags.http_restricted_api_files, "--http-restricted-api-file");
  if (!http_specs.ok()) return http_specs.status();
  auto grpc_specs = RestrictionSpecs(flags.grpc_restricted_protocol, flags.grpc_restricted_protocol_files,
                                     "--grpc-restricted-protocol-file");
  if (!grpc_specs.ok()) return grpc_specs.status();
  auto http_policy = auth::AccessPolicy::Parse(http_specs.value(), auth::Protocol::kHttp);
  if (!http_policy.ok()) return http_policy.status();
  auto grpc_policy = auth::AccessPolicy::Parse(grpc_specs.value(), auth::Protocol::kGrpc);
  if (!grpc_policy.ok()) return grpc_policy.status();
  if (!flags.http_use_ssl &&
      (!flags.http_server_cert.empty() || !flags.http_server_key.empty() || !flags.http_root_cert.empty())) {
    return InvalidArgument("--http-server-cert/--http-server-key/--http-root-cert need --http-use-ssl=true");
  }
  if (!flags.grpc_use_ssl && !flags.grpc_use_ssl_mutual &&
      (!flags.grpc_server_cert.empty() || !flags.grpc_server_key.empty() || !flags.grpc_root_cert.empty())) {
    return InvalidArgument("--grpc-server-cert/--grpc-server-key/--grpc-root-cert need --grpc-use-ssl=true");
  }
  return AccessPolicies{std::move(http_policy).value(), std::move(grpc_policy).value()};
}

HttpServerOptions HttpOptions(const Flags& flags, const Observability& o, auth::AccessPolicy policy,
                              const common::RuntimeSettings& runtime_settings) {
  HttpServerOptions options;
  options.access_policy = std::make_shared<const auth::AccessPolicy>(std::move(policy));
  options.allow_unauthenticated_model_control = flags.allow_unauthenticated_model_control;
  options.tls = {.enabled = flags.http_use_ssl,
                 .server_cert_file = flags.http_server_cert,
                 .server_key_file = flags.http_server_key,
                 .root_cert_file = flags.http_root_cert};
  options.address = flags.http_address;
  options.port = flags.http_port;
  options.io_threads =
      flags.http_thread_count > 0 ? flags.http_thread_count : DefaultHttpThreads(flags.thread_budget);
  options.max_input_size = flags.http_max_input_size;
  options.strict_readiness = flags.strict_readiness;
  options.server_version = ORTSERVE_VERSION;
  options.max_header_bytes = flags.http_max_header_size;
  options.max_body_chunks = flags.http_max_body_chunks;
  options.max_connections = flags.http_max_connections;
  options.max_json_depth = flags.http_max_json_depth;
  options.max_tensor_elements = flags.max_tensor_elements;
  options.idle_timeout = std::chrono::seconds(flags.http_idle_timeout_secs);
  options.read_timeout = std::chrono::seconds(flags.http_read_timeout_secs);
  options.access_log = o.access_log;
  options.tracer = o.tracer;
  options.runtime_settings = runtime_settings;
  return options;
}

GrpcServerOptions GrpcOptions(const Flags& flags, const Observability& o, auth::AccessPolicy policy,
                              const common::RuntimeSettings& runtime_settings) {
  GrpcServerOptions options;
  options.access_policy = std::make_shared<const auth::AccessPolicy>(std::move(policy));
  options.allow_unauthenticated_model_control = flags.allow_unauthenticated_model_control;
  options.tls = {.enabled = flags.grpc_use_ssl || flags.grpc_use_ssl_mutual,
                 .mutual = flags.grpc_use_ssl_mutual,
                 .server_cert_file = flags.grpc_server_cert,
                 .server_key_file = flags.grpc_server_key,
                 .root_cert_file = flags.grpc_root_cert};
  options.address = flags.grpc_address;
  options.port = flags.grpc_port;
  options.completion_queue_threads = flags.grpc_thread_count;
  options.max_message_bytes = flags.grpc_max_message_size;
  options.max_concurrent_streams = flags.grpc_max_concurrent_streams;
  options.max_connections = flags.grpc_max_connections;
  options.max_buffered_bytes = flags.grpc_max_buffered_bytes;
  options.max_tensor_elements = flags.max_tensor_elements;
  options.strict_readiness = flags.strict_readiness;
  options.server_version = ORTSERVE_VERSION;
  options.access_log = o.access_log;
  options.tracer = o.tracer;
  options.runtime_settings = runtime_settings;
  return options;
}

// The serving state, in the order it is built; Run() stops it in reverse.
struct Server {
  std::shared_ptr<common::LogControl> log_control;  // installed first, by main()
  std::unique_ptr<ModelRepository> repository;
  Observability observability;
  std::shared_ptr<common::ClientQuotas> quotas;  // null without --client-quota-config
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<GrpcServer> grpc;
  std::unique_ptr<metrics::MetricsServer> metrics;  // null with --allow-metrics=false
};

// Repository, observability and both front ends, created but not started.
Status Build(const Flags& flags, const TritonSettings& triton, Server* s) {
  auto repository = MakeRepository(flags, triton);
  if (!repository.ok()) return repository.status();
  s->repository = std::move(repository).value();
  auto observability = MakeObservability(flags);
  if (!observability.ok()) return observability.status();
  s->observability = std::move(observability).value();
  auto policies = ParseAccessFlags(flags);
  if (!policies.ok()) return policies.status();
  auto quotas = MakeQuotas(flags);
  if (!quotas.ok()) return quotas.status();
  s->quotas = std::move(quotas).value();
  std::string id_header = flags.client_id_header;
  for (char& c : id_header) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const common::QuotaSettings quota_settings{.quotas = s->quotas, .client_id_header = id_header};
  const common::RuntimeSettings runtime_settings{.log = s->log_control, .trace = s->observability.trace_settings};
  // One registry of shared memory regions for both front ends.
  auto shared_memory = std::make_shared<common::SharedMemoryRegistry>(common::SharedMemoryOptions{
      .allow_client_shm = flags.triton.allow_client_shm, .max_regions = flags.max_shm_regions});
  if (flags.triton.allow_client_shm) {
    spdlog::info("client system shared memory enabled (--allow-client-shm=true), at most {} regions", flags.max_shm_regions);
  }
  HttpServerOptions http_options = HttpOptions(flags, s->observability, std::move(policies->http), runtime_settings);
  http_options.shared_memory = shared_memory;
  http_options.quotas = quota_settings;
  auto http = HttpServer::Create(std::move(http_options), s->repository.get());
  if (!http.ok()) return http.status();
  s->http = std::move(http).value();
  GrpcServerOptions grpc_options = GrpcOptions(flags, s->observability, std::move(policies->grpc), runtime_settings);
  grpc_options.shared_memory = std::move(shared_memory);
  grpc_options.quotas = quota_settings;
  auto grpc = GrpcServer::Create(std::move(grpc_options), s->repository.get());
  if (!grpc.ok()) return grpc.status();
  s->grpc = std::move(grpc).value();
  return Status::Ok();
}

Status StartMetrics(const Flags& flags, const std::string& malloc_name, Server* s) {
  if (!flags.allow_metrics) {
    spdlog::info("Prometheus metrics endpoint disabled (--allow-metrics=false)");
    return Status::Ok();
  }
  std::string providers;
  for (const std::string& p : AvailableExecutionProviders()) providers += (providers.empty() ? "" : ",") + p;
  const auto& exporter = s->observability.trace_exporter;
  auto collector = std::make_shared<metrics::MetricsCollector>(metrics::MetricsSources{
      .repository = s->repository.get(),
      .version = ORTSERVE_VERSION,
      .onnxruntime_version = OrtVersion(),
      .execution_providers = providers,
      .allocator = malloc_name,
      .http_open_connections = [h = s->http.get()] { return h->OpenConnections(); },
      .http_rejected_connections = [h = s->http.get()] { return h->RejectedConnections(); },
      .grpc_active_calls = [g = s->grpc.get()] { return g->ActiveCalls(); },
      .grpc_open_connections = [g = s->grpc.get()] { return g->OpenConnections(); },
      .grpc_rejected_connections = [g = s->grpc.get()] { return g->RejectedConnections(); },
      .quota_rejections = s->quotas ? std::function<std::vector<common::ClientQuotas::RejectedCount>()>(
                                          [q = s->quotas] { return q->Rejected(); })
                                    : nullptr,
      .quota_tracked_clients = s->quotas ? std::function<size_t()>([q = s->quotas] { return q->TrackedClients(); })
                                         : nullptr,
      .trace_export = exporter ? std::function<tracing::TraceExportCounters()>(
                                     [exporter] { return exporter->counters(); })
                               : nullptr});
  auto created = metrics::MetricsServer::Create(
      {.address = flags.metrics_address, .port = flags.metrics_port, .max_connections = flags.metrics_max_connections},
      [collector] { return collector->Render(); });
  if (!created.ok()) return created.status();
  s->metrics = std::move(created).value();
  if (Status st = s->metrics->Start(); !st.ok()) return st;
  spdlog::info("Prometheus metrics endpoint listening on {}:{}/metrics", flags.metrics_address, s->metrics->port());
  return Status::Ok();
}

// Loads the models, then opens the ports.
Status Start(const Flags& flags, const std::string& malloc_name, Server* s) {
  // Models load before the port opens so that a client never sees a model
  // missing that is merely still loading; liveness follows the port.
  s->repository->LoadAll();
  if (flags.exit_on_error && !s->repository->AllModelsReady()) {
    return Internal("failed to load all models (--exit-on-error)");
  }
  if (Status st = s->http->Start(); !st.ok()) return st;
  spdlog::info("HTTP KServe v2 endpoint listening on {}:{} ({} I/O threads, 1 inflate thread{})", flags.http_address,
               s->http->port(),
               flags.http_thread_count > 0 ? flags.http_thread_count : DefaultHttpThreads(flags.thread_budget),
               !flags.http_use_ssl            ? ""
               : flags.http_root_cert.empty() ? ", HTTPS"
                                              : ", HTTPS with client certificates");
  if (Status st = s->grpc->Start(); !st.ok()) return st;
  spdlog::info("gRPC KServe v2 endpoint listening on {}:{} ({} completion-queue threads)", flags.grpc_address,
               s->grpc->port(), flags.grpc_thread_count);
  return StartMetrics(flags, malloc_name, s);
}

// After the first SIGINT/SIGTERM: every accepted request is answered, then
// everything stops. A second signal exits at once.
void ShutDown(const Flags& flags, const sigset_t& signals, Server* s) {
  std::thread second_signal([signals] {
    int again = 0;
    sigwait(&signals, &again);
    std::_Exit(1);
  });
  second_signal.detach();

  // Not ready at once; with a drain delay, requests are still served while
  // load balancers notice (a second signal still exits at once).
  s->http->MarkNotReady();
  s->grpc->MarkNotReady();
  if (flags.drain_delay_secs > 0) {
    spdlog::info("not ready; serving {} s more before refusing new requests (--drain-delay-secs)",
                 flags.drain_delay_secs);
    std::this_thread::sleep_for(std::chrono::seconds(flags.drain_delay_secs));
  }
  // Both front ends stop taking requests (503 / UNAVAILABLE, not ready) but
  // keep their connections, so that every request already accepted gets its
  // answer: the models compute what is queued or running until the exit
  // timeout, then answer what is left with 503 (stopping running batches).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(flags.exit_timeout_secs);
  s->http->StopAccepting();
  s->grpc->StopAccepting();
  s->repository->Shutdown(deadline);
  // Every request is answered now; the front ends get a short grace to write
  // the answers before they close (idle gRPC streams are cancelled).
  constexpr auto kWriteGrace = std::chrono::seconds(2);
  s->grpc->Stop(kWriteGrace);
  s->http->WaitForInFlight(kWriteGrace);
  // Scrapes keep working while requests drain.
  if (s->metrics) s->metrics->Stop();
  s->http->Stop();
  // Every request is answered now: what tracing buffered gets a bounded
  // chance to reach the collector (plus an export already under way).
  if (s->observability.trace_exporter) s->observability.trace_exporter->Shutdown(std::chrono::seconds(5));
}

}  // namespace
}  // namespace ortserve::app

int main(int argc, char** argv) {
  using namespace ortserve::app;
  // ONNX Runtime's telemetry off unless the operator asks for it (set
  // ORT_DISABLE_TELEMETRY=0); set while the process has one thread.
  setenv("ORT_DISABLE_TELEMETRY", "1", /*overwrite=*/0);
  if (argc > 1 && std::string_view(argv[1]) == "check") return RunCheck(argc - 1, argv + 1);
  CLI::App app{"ortserve: a KServe v2 / Triton-compatible inference server for ONNX models\n"
               "  ortserve check --model-repository=DIR [server flags]: checks the repository offline "
               "(see ortserve check --help)"};
  app.set_version_flag("--version", std::string("ortserve ") + ORTSERVE_VERSION);
  Flags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);

  auto log_control = ortserve::common::LogControl::Install(LogSettingsFrom(flags));
  if (!log_control.ok()) {
    std::fprintf(stderr, "%s\n", log_control.status().message().c_str());
    return 1;
  }
  const sigset_t signals = BlockSignals(!flags.client_quota_config.empty());

  const std::string malloc_name = ortserve::MallocName();  // logged here, labelled in ortserve_build_info
  spdlog::info("ortserve {} with ONNX Runtime {}, malloc: {}", ORTSERVE_VERSION, ortserve::OrtVersion(),
               malloc_name);

  RaiseAndCheckDescriptorLimit(flags);
  ResolveThreadBudget(flags);
  if (ortserve::Status st = MapSingleModelRepository(&flags.model_repository, flags.single_model_name); !st.ok()) {
    spdlog::critical("{}", st.message());
    return 1;
  }
  // The links of a single model's directory go when the server does, after
  // its models (declared before `server`).
  const SingleModelLinksRemover remove_links(flags.model_repository);
  auto triton = ApplyTritonFlags(app, flags.triton, flags.log_format == "json");
  if (!triton.ok()) {
    spdlog::critical("{}", triton.status().message());
    return 1;
  }
  Server server;
  server.log_control = std::move(log_control).value();
  ortserve::Status st = Build(flags, triton.value(), &server);
  if (st.ok()) st = Start(flags, malloc_name, &server);
  if (!st.ok()) {
    spdlog::critical("{}", st.message());
    return 1;
  }

  sigset_t waited = signals;
  if (server.quotas) sigaddset(&waited, SIGHUP);
  int sig = 0;
  while (sigwait(&waited, &sig) == 0 && sig == SIGHUP) ReloadQuotas(flags, server.quotas.get());
  spdlog::info("received {}, shutting down (up to {} s for in-flight requests; a second signal "
               "exits at once)",
               sig == SIGINT ? "SIGINT" : "SIGTERM", flags.exit_timeout_secs);
  ShutDown(flags, signals, &server);
  spdlog::info("shutdown complete");
  return 0;
}
