#pragma once
// Renders every ortserve metric in the Prometheus text format: build info,
// process, front-end and per model version metrics. Reads the lock-free
// counters and histograms of ModelStatistics, and the repository's index
// (under its shared lock) — never anything on the request path's locks.
// Render() is safe from any thread; each call takes a fresh snapshot.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "repository/ModelRepository.h"
#include "server/common/ClientQuotas.h"
#include "server/tracing/OtlpExporter.h"

namespace ortserve::metrics {

struct MetricsSources {
  const ModelRepository* repository = nullptr;  // must outlive the collector
  // ortserve_build_info labels.
  std::string version;
  std::string onnxruntime_version;
  std::string execution_providers;  // comma separated, in ORT's order
  std::string allocator;            // core/MallocName.h: the malloc really in use
  // Front-end gauges; an empty function leaves the sample out.
  std::function<size_t()> http_open_connections;
  std::function<uint64_t()> http_rejected_connections;
  std::function<size_t()> grpc_active_calls;
  // Empty where gRPC accepts the port's connections itself (TLS).
  std::function<size_t()> grpc_open_connections;
  std::function<uint64_t()> grpc_rejected_connections;
  // ortserve_quota_rejected_total; empty (no quotas): no series.
  std::function<std::vector<common::ClientQuotas::RejectedCount>()> quota_rejections;
  std::function<size_t()> quota_tracked_clients;
  // The OTLP trace exporter's counters; empty (tracing off): no trace series.
  std::function<tracing::TraceExportCounters()> trace_export;
};

// The whole exposition for the given repository index (model states),
// ready models (everything per model version) and response cache (nullopt:
// the server has none) and configured rollouts. `sources.repository` is not
// read. Exposed for tests.
std::string RenderMetrics(const MetricsSources& sources, const std::vector<ModelIndexEntry>& index,
                          const std::vector<std::shared_ptr<Model>>& ready_models,
                          const std::optional<ResponseCacheUsage>& cache = std::nullopt,
                          const std::vector<RolloutStatus>& rollouts = {},
                          const std::optional<ModelLoadStats>& loads = std::nullopt);

class MetricsCollector {
 public:
  explicit MetricsCollector(MetricsSources sources);
  std::string Render() const;

 private:
  MetricsSources sources_;
};

}  // namespace ortserve::metrics
