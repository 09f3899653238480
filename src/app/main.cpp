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

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "repository/ModelRepository.h"
#include "runtime/OrtModelInstance.h"
#include "server/grpc/GrpcServer.h"
#include "server/http/HttpServer.h"

namespace {

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
  bool strict_readiness = true;
  int exit_timeout_secs = 30;
  uint64_t http_max_input_size = 64ull << 20;
  int http_idle_timeout_secs = 60;
  int thread_budget = 0;
  int log_verbose = 0;
};

int DefaultHttpThreads() {
  // HTTP threads only parse and encode; a couple keep up with the models and
  // leave the cores to inference.
  unsigned cores = std::thread::hardware_concurrency();
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
                 "HTTP I/O threads (0: 2, or 4 on machines with 8+ cores). They never run inference")
      ->capture_default_str();
  app.add_option("--http-max-input-size", f.http_max_input_size,
                 "Largest request body accepted, in bytes, also after decompression")
      ->capture_default_str();
  app.add_option("--http-idle-timeout-secs", f.http_idle_timeout_secs,
                 "Close a connection that sends nothing (or stalls mid-request) for this long")
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
                 "Port of the Prometheus endpoint. Reserved: metrics are not built yet, so "
                 "nothing listens here")
      ->capture_default_str();
  app.add_option("--strict-readiness", f.strict_readiness,
                 "true: /v2/health/ready is 200 only when every model in the repository is "
                 "ready; false: once the server is up")
      ->capture_default_str();
  app.add_option("--exit-timeout-secs", f.exit_timeout_secs,
                 "On SIGTERM/SIGINT, how long to let in-flight requests finish")
      ->capture_default_str();
  app.add_option("--thread-budget", f.thread_budget,
                 "Cores the model instances may use in total (0: all cores). Each instance's "
                 "intra-op threads are planned so the sum stays within it unless a config "
                 "sets threads explicitly")
      ->capture_default_str();
  app.add_option("--log-verbose", f.log_verbose, "0: info; 1 and above: debug")
      ->capture_default_str();
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
  CLI::App app{"ortserve: a KServe v2 / Triton-compatible inference server for ONNX models"};
  app.set_version_flag("--version", std::string("ortserve ") + ORTSERVE_VERSION);
  Flags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);

  spdlog::set_level(flags.log_verbose > 0 ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %v");
  const sigset_t signals = BlockShutdownSignals();

  spdlog::info("ortserve {} with ONNX Runtime {}", ORTSERVE_VERSION, ortserve::OrtVersion());

  auto repository = ortserve::ModelRepository::Create(
      {.repository_path = flags.model_repository, .thread_budget = flags.thread_budget});
  if (!repository.ok()) {
    spdlog::critical("{}", repository.status().message());
    return 1;
  }

  ortserve::HttpServerOptions http_options;
  http_options.address = flags.http_address;
  http_options.port = flags.http_port;
  http_options.io_threads = flags.http_thread_count > 0 ? flags.http_thread_count : DefaultHttpThreads();
  http_options.max_input_size = flags.http_max_input_size;
  http_options.strict_readiness = flags.strict_readiness;
  http_options.server_version = ORTSERVE_VERSION;
  http_options.idle_timeout = std::chrono::seconds(flags.http_idle_timeout_secs);
  auto http = ortserve::HttpServer::Create(http_options, repository->get());
  if (!http.ok()) {
    spdlog::critical("{}", http.status().message());
    return 1;
  }

  ortserve::GrpcServerOptions grpc_options;
  grpc_options.address = flags.grpc_address;
  grpc_options.port = flags.grpc_port;
  grpc_options.completion_queue_threads = flags.grpc_thread_count;
  grpc_options.max_message_bytes = flags.grpc_max_message_size;
  grpc_options.strict_readiness = flags.strict_readiness;
  grpc_options.server_version = ORTSERVE_VERSION;
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
  spdlog::info("HTTP KServe v2 endpoint listening on {}:{} ({} I/O threads)", flags.http_address,
               (*http)->port(), http_options.io_threads);
  if (auto st = (*grpc)->Start(); !st.ok()) {
    spdlog::critical("{}", st.message());
    return 1;
  }
  spdlog::info("gRPC KServe v2 endpoint listening on {}:{} ({} completion-queue threads)",
               flags.grpc_address, (*grpc)->port(), grpc_options.completion_queue_threads);

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

  // Both front ends drain within the one exit timeout: HTTP first stops
  // accepting and waits; gRPC gets what is left of the deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(flags.exit_timeout_secs);
  (*http)->StopAccepting();
  (*http)->WaitForInFlight(std::chrono::seconds(flags.exit_timeout_secs));
  (*grpc)->Stop(std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max(deadline - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration::zero())));
  (*repository)->Shutdown();
  (*http)->Stop();
  spdlog::info("shutdown complete");
  return 0;
}
