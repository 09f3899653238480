#include "server/metrics/MetricsCollector.h"

#include <array>
#include <memory>
#include <vector>

#include "repository/ModelRepository.h"
#include "server/metrics/ProcessStats.h"
#include "server/metrics/PrometheusText.h"

namespace ortserve::metrics {
namespace {

constexpr double kNanosPerSecond = 1e9;

struct ModelView {
  std::shared_ptr<Model> model;
  Labels labels;  // model, version: views into the model's strings
};

struct HistogramFamily {
  const char* name;
  const char* help;
  Histogram ModelStatistics::*member;
  double divisor;
};

constexpr std::array<HistogramFamily, 6> kHistograms = {{
    {"ortserve_request_duration_seconds",
     "Time from a request's arrival in the server to its response being ready, successful requests only.",
     &ModelStatistics::request_duration, kNanosPerSecond},
    {"ortserve_queue_duration_seconds",
     "Time a successful request waited in the model's queue before its batch started.",
     &ModelStatistics::queue_duration, kNanosPerSecond},
    {"ortserve_compute_input_duration_seconds",
     "Time spent preparing the inputs of the batch that ran each successful request.",
     &ModelStatistics::compute_input_duration, kNanosPerSecond},
    {"ortserve_compute_infer_duration_seconds",
     "Time spent running the model for the batch that ran each successful request.",
     &ModelStatistics::compute_infer_duration, kNanosPerSecond},
    {"ortserve_compute_output_duration_seconds",
     "Time spent splitting and building the outputs of the batch that ran each successful request.",
     &ModelStatistics::compute_output_duration, kNanosPerSecond},
    {"ortserve_batch_size", "Rows (summed dimension 0) per model execution.", &ModelStatistics::batch_size, 1.0},
}};

void RenderProcess(PrometheusText& out) {
  const ProcessStats p = ReadProcessStats();
  if (p.cpu_seconds) {
    out.Family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    out.Sample("process_cpu_seconds_total", {}, *p.cpu_seconds);
  }
  if (p.resident_bytes) {
    out.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    out.Sample("process_resident_memory_bytes", {}, *p.resident_bytes);
  }
  if (p.threads) {
    out.Family("process_threads", "gauge", "Number of OS threads in the process.");
    out.Sample("process_threads", {}, *p.threads);
  }
  if (p.start_time_seconds) {
    out.Family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
    out.Sample("process_start_time_seconds", {}, *p.start_time_seconds);
  }
}

void RenderTraceExport(PrometheusText& out, const tracing::TraceExportCounters& c) {
  out.Family("ortserve_trace_spans_exported_total", "counter",
             "Spans the OTLP collector (--trace-otlp-endpoint) accepted.");
  out.Sample("ortserve_trace_spans_exported_total", {}, c.exported);
  out.Family("ortserve_trace_spans_dropped_total", "counter",
             "Spans dropped instead of exported: buffer_full (--trace-buffer-spans were waiting already), "
             "export_failed (the export that carried them failed).");
  out.Sample("ortserve_trace_spans_dropped_total", {{"reason", "buffer_full"}}, c.dropped_buffer_full);
  out.Sample("ortserve_trace_spans_dropped_total", {{"reason", "export_failed"}}, c.dropped_export_failed);
  out.Family("ortserve_trace_export_failures_total", "counter",
             "OTLP export requests that failed: no connection, a timeout, or a non-2xx answer.");
  out.Sample("ortserve_trace_export_failures_total", {}, c.failed_exports);
  out.Family("ortserve_trace_buffered_spans", "gauge", "Spans waiting in the exporter's buffer right now.");
  out.Sample("ortserve_trace_buffered_spans", {}, c.buffered);
}

// The server-wide families: build info, the process, the front ends'
// connections and calls, and the trace exporter.
void RenderServer(PrometheusText& out, const MetricsSources& sources) {
  out.Family("ortserve_build_info", "gauge",
             "Always 1; the labels name the ortserve and ONNX Runtime versions, the execution providers "
             "this ONNX Runtime build offers and the malloc the process runs on.");
  out.Sample("ortserve_build_info",
             {{"version", sources.version},
              {"onnxruntime_version", sources.onnxruntime_version},
              {"execution_providers", sources.execution_providers},
              {"allocator", sources.allocator}},
             uint64_t{1});
  RenderProcess(out);

  if (sources.http_open_connections || sources.grpc_open_connections) {
    out.Family("ortserve_open_connections", "gauge",
               "Client connections open right now on the HTTP endpoint and (plaintext) the gRPC endpoint.");
    if (sources.http_open_connections) {
      out.Sample("ortserve_open_connections", {{"protocol", "http"}},
                 static_cast<uint64_t>(sources.http_open_connections()));
    }
    if (sources.grpc_open_connections) {
      out.Sample("ortserve_open_connections", {{"protocol", "grpc"}},
                 static_cast<uint64_t>(sources.grpc_open_connections()));
    }
  }
  if (sources.http_rejected_connections || sources.grpc_rejected_connections) {
    out.Family("ortserve_connections_rejected_total", "counter",
               "Connections refused because the endpoint had its limit open (--http-max-connections, "
               "--grpc-max-connections).");
    if (sources.http_rejected_connections) {
      out.Sample("ortserve_connections_rejected_total", {{"protocol", "http"}}, sources.http_rejected_connections());
    }
    if (sources.grpc_rejected_connections) {
      out.Sample("ortserve_connections_rejected_total", {{"protocol", "grpc"}}, sources.grpc_rejected_connections());
    }
  }
  if (sources.grpc_active_calls) {
    out.Family("ortserve_active_calls", "gauge",
               "gRPC calls in progress right now (a ModelStreamInfer stream counts once).");
    out.Sample("ortserve_active_calls", {{"protocol", "grpc"}},
               static_cast<uint64_t>(sources.grpc_active_calls()));
  }
  if (sources.quota_rejections) {
    out.Family("ortserve_quota_rejected_total", "counter",
               "Infer requests refused because their client was over its quota (--client-quota-config); "
               "clients without an entry of their own are counted as client=\"other\".");
    for (const auto& r : sources.quota_rejections()) {
      out.Sample("ortserve_quota_rejected_total", {{"client", r.client}, {"model", r.model}}, r.count);
    }
  }
  if (sources.quota_tracked_clients) {
    out.Family("ortserve_quota_tracked_clients", "gauge",
               "Clients whose quota state (buckets, in-flight counts) is kept now; at most max_tracked_clients "
               "plus those with requests in flight.");
    out.Sample("ortserve_quota_tracked_clients", {}, static_cast<uint64_t>(sources.quota_tracked_clients()));
  }
  if (sources.trace_export) RenderTraceExport(out, sources.trace_export());
}

// Model state for every version the repository knows, failed ones included.
void RenderModelStates(PrometheusText& out, const std::vector<ModelIndexEntry>& index) {
  out.Family("ortserve_model_state", "gauge",
             "1 for the state each model version is in (READY, LOADING, UNAVAILABLE, UNLOADING), 0 for the others.");
  static constexpr std::array<ModelState, 4> kStates = {ModelState::kReady, ModelState::kLoading,
                                                        ModelState::kUnavailable, ModelState::kUnloading};
  for (const ModelIndexEntry& e : index) {
    for (ModelState state : kStates) {
      out.Sample("ortserve_model_state",
                 {{"model", e.name}, {"version", e.version}, {"state", ModelStateName(state)}},
                 uint64_t{e.state == state ? 1u : 0u});
    }
  }
}

// Per ready model version: how its requests ended and what it executed.
void RenderModelCounters(PrometheusText& out, const std::vector<ModelView>& models) {
  out.Family("ortserve_model_load_duration_seconds", "gauge",
             "Time the last load of the model version took: creating its instances, warming up, starting its "
             "scheduler.");
  for (const ModelView& m : models) {
    out.Sample("ortserve_model_load_duration_seconds", m.labels,
               static_cast<double>(m.model->stats().load_duration_ns.load(std::memory_order_relaxed)) /
                   kNanosPerSecond);
  }

  out.Family("ortserve_model_load_cache", "gauge",
             "1 for how the last load of the model version used the optimized-model cache (--model-cache-dir): "
             "hit (read the saved graph), miss (optimized and saved it), off (no cache, or a GPU model).");
  static constexpr std::array<const char*, 3> kCacheOutcomes = {"off", "miss", "hit"};
  for (const ModelView& m : models) {
    const int outcome = m.model->stats().load_cache_outcome.load(std::memory_order_relaxed);
    for (int i = 0; i < static_cast<int>(kCacheOutcomes.size()); ++i) {
      auto labels = m.labels;
      labels.emplace_back("outcome", kCacheOutcomes[i]);
      out.Sample("ortserve_model_load_cache", labels, uint64_t{outcome == i ? 1u : 0u});
    }
  }

  out.Family("ortserve_requests_total", "counter",
             "Inference requests that reached the model version, by how they ended: success, invalid_input "
             "(failed validation), rejected (queue full, not ready, shutting down or stopped at the exit timeout), timeout (timeout expired in "
             "the queue or during a run that was then terminated), cancelled (client went away), internal (the "
             "run failed).");
  for (const ModelView& m : models) {
    const ModelStatistics& stats = m.model->stats();
    for (size_t i = 0; i < kRequestOutcomeCount; ++i) {
      Labels labels = m.labels;
      labels.emplace_back("outcome", RequestOutcomeName(static_cast<RequestOutcome>(i)));
      out.Sample("ortserve_requests_total", labels, stats.outcomes[i].load(std::memory_order_relaxed));
    }
  }

  out.Family("ortserve_fallback_total", "counter",
             "Requests to the model version handed to its fallback model (parameter fallback_model), by "
             "reason: queue_full, expected_wait (queue depth x average execution time / instances exceeded the "
             "request's timeout), run_failed. The fallback counts them in its own ortserve_requests_total.");
  for (const ModelView& m : models) {
    const ModelStatistics& stats = m.model->stats();
    for (size_t i = 0; i < kFallbackReasonCount; ++i) {
      Labels labels = m.labels;
      labels.emplace_back("reason", FallbackReasonName(static_cast<FallbackReason>(i)));
      out.Sample("ortserve_fallback_total", labels, stats.fallbacks[i].load(std::memory_order_relaxed));
    }
  }
  out.Family("ortserve_terminated_executions_total", "counter",
             "Executions stopped mid-run (ORT RunOptions terminate) because every request of the batch had "
             "timed out or been cancelled, or shutdown's exit timeout had passed.");
  for (const ModelView& m : models) {
    out.Sample("ortserve_terminated_executions_total", m.labels,
               m.model->stats().terminated_executions.load(std::memory_order_relaxed));
  }

  out.Family("ortserve_inferences_total", "counter",
             "Inferences performed: the rows (summed dimension 0) of successful executions; 1 per request for "
             "models without batching.");
  for (const ModelView& m : models) {
    out.Sample("ortserve_inferences_total", m.labels,
               m.model->stats().inference_count.load(std::memory_order_relaxed));
  }
  out.Family("ortserve_executions_total", "counter",
             "Successful model executions (one per batch run on an instance).");
  for (const ModelView& m : models) {
    out.Sample("ortserve_executions_total", m.labels,
               m.model->stats().execution_count.load(std::memory_order_relaxed));
  }
}

// Per ready model version: its queue and instances now, and the histograms.
void RenderModelGauges(PrometheusText& out, const std::vector<ModelView>& models) {
  out.Family("ortserve_pending_requests", "gauge", "Requests waiting in the model version's queue right now.");
  for (const ModelView& m : models) {
    out.Sample("ortserve_pending_requests", m.labels, static_cast<uint64_t>(m.model->QueueDepth()));
  }
  out.Family("ortserve_busy_instances", "gauge", "Instances of the model version running a batch right now.");
  for (const ModelView& m : models) {
    out.Sample("ortserve_busy_instances", m.labels, static_cast<uint64_t>(m.model->BusyInstances()));
  }

  for (const HistogramFamily& h : kHistograms) {
    out.Family(h.name, "histogram", h.help);
    for (const ModelView& m : models) {
      out.HistogramSamples(h.name, m.labels, (m.model->stats().*h.member).Read(), h.divisor);
    }
  }
}

// Per ready sequence-batched model version (sequence slots > 0): its slots,
// live sequences, implicit state and how its sequences ended. No families
// when no such model is loaded.
void RenderSequenceMetrics(PrometheusText& out, const std::vector<ModelView>& models) {
  std::vector<const ModelView*> stateful;
  for (const ModelView& m : models) {
    if (m.model->stats().sequences.slots.load(std::memory_order_relaxed) > 0) stateful.push_back(&m);
  }
  if (stateful.empty()) return;
  struct Gauge {
    const char* name;
    const char* help;
    const std::atomic<uint64_t> SequenceStats::*member;
  };
  static constexpr Gauge kGauges[] = {
      {"ortserve_sequence_slots", "Sequence slots of all the model version's instances (fixed at load).",
       &SequenceStats::slots},
      {"ortserve_sequences_active", "Sequences holding a slot right now.", &SequenceStats::active},
      {"ortserve_sequence_state_bytes", "Bytes of implicit state the server holds for the version's sequences now.",
       &SequenceStats::state_bytes},
  };
  for (const Gauge& g : kGauges) {
    out.Family(g.name, "gauge", g.help);
    for (const ModelView* m : stateful) {
      out.Sample(g.name, m->labels, (m->model->stats().sequences.*g.member).load(std::memory_order_relaxed));
    }
  }
  out.Family("ortserve_sequences_started_total", "counter", "Sequences started (STARTs accepted, restarts included).");
  for (const ModelView* m : stateful) {
    out.Sample("ortserve_sequences_started_total", m->labels,
               m->model->stats().sequences.started.load(std::memory_order_relaxed));
  }
  out.Family("ortserve_sequences_ended_total", "counter",
             "Sequences ended, by reason: end (a request with sequence_end was accepted), idle_timeout "
             "(max_sequence_idle_microseconds), failed (one of its requests failed), restarted (a START for "
             "its running id), shutdown (open when the version shut down).");
  for (const ModelView* m : stateful) {
    for (size_t i = 0; i < kSequenceEndCount; ++i) {
      Labels labels = m->labels;
      labels.emplace_back("reason", SequenceEndName(static_cast<SequenceEnd>(i)));
      out.Sample("ortserve_sequences_ended_total", labels,
                 m->model->stats().sequences.ended[i].load(std::memory_order_relaxed));
    }
  }
}

// The response cache: the server-wide state, and each model version's hits
// and misses (Triton's cache_hit / cache_miss statistics). No families when
// the server has no cache.
void RenderResponseCache(PrometheusText& out, const ResponseCacheUsage& cache, const std::vector<ModelView>& models) {
  struct Gauge {
    const char* name;
    const char* help;
    uint64_t value;
  };
  const Gauge gauges[] = {
      {"ortserve_response_cache_capacity_bytes", "The response cache's size (--cache-config local,size=BYTES).",
       cache.capacity_bytes},
      {"ortserve_response_cache_used_bytes", "Bytes the response cache's entries count against its size now.",
       cache.used_bytes},
      {"ortserve_response_cache_entries", "Answers held in the response cache now.", cache.entries},
  };
  for (const Gauge& g : gauges) {
    out.Family(g.name, "gauge", g.help);
    out.Sample(g.name, {}, g.value);
  }
  out.Family("ortserve_response_cache_evictions_total", "counter",
             "Least recently used answers dropped to make room for new ones.");
  out.Sample("ortserve_response_cache_evictions_total", {}, cache.evictions);
  out.Family("ortserve_response_cache_lookups_total", "counter",
             "Requests of models with response_cache enabled looked up in the cache, by result: hit (answered "
             "from the cache) or miss (computed, then stored).");
  for (const ModelView& m : models) {
    const ModelStatistics& stats = m.model->stats();
    const std::pair<const char*, const DurationStat*> results[] = {{"hit", &stats.cache_hit},
                                                                   {"miss", &stats.cache_miss}};
    for (const auto& [result, stat] : results) {
      Labels labels = m.labels;
      labels.emplace_back("result", result);
      out.Sample("ortserve_response_cache_lookups_total", labels, stat->count.load(std::memory_order_relaxed));
    }
  }
}

// Input drift: per version with drift statistics and a reference, per input.
void RenderInputDrift(PrometheusText& out, const std::vector<ModelView>& models) {
  bool family = false;
  for (const ModelView& m : models) {
    const InputDrift* drift = m.model->drift();
    if (!drift) continue;
    const DriftSummary s = drift->Snapshot();
    for (const DriftInputSummary& input : s.inputs) {
      if (!input.psi) continue;
      if (!family) {
        out.Family("ortserve_input_drift_psi", "gauge",
                   "Population stability index of the input's values since the reference was fixed, against "
                   "the reference (drift_baseline_requests or drift_reference); above 0.2 is usually read as drift.");
        family = true;
      }
      Labels labels = m.labels;
      labels.emplace_back("input", input.name);
      out.Sample("ortserve_input_drift_psi", labels, *input.psi);
    }
  }
}

// Shadow comparison: per serving version with shadow_* parameters (the
// `version` label is the version whose answers were compared), per output
// where per output.
void RenderShadow(PrometheusText& out, const std::vector<ModelView>& models) {
  std::vector<std::pair<const ModelView*, ShadowSummary>> shadows;
  for (const ModelView& m : models) {
    if (const ShadowComparison* shadow = m.model->shadow()) shadows.emplace_back(&m, shadow->Snapshot());
  }
  if (shadows.empty()) return;
  const std::pair<const char*, const char*> counters[] = {
      {"ortserve_shadow_compared_total", "Answers of the version compared with the shadow version's (shadow_version)."},
      {"ortserve_shadow_dropped_total",
       "Sampled requests not run on the shadow version: shadow runs already in flight, or the shadow version "
       "not READY or its queue full."},
      {"ortserve_shadow_failed_total", "Shadow runs the shadow version answered with an error."}};
  for (size_t i = 0; i < 3; ++i) {
    out.Family(counters[i].first, "counter", counters[i].second);
    for (const auto& [m, s] : shadows) {
      const uint64_t values[] = {s.compared, s.dropped, s.failed};
      out.Sample(counters[i].first, m->labels, values[i]);
    }
  }
  // Each family's samples together, as the text format requires.
  auto per_output = [&](const char* name, const char* type, const char* help, const auto& sample) {
    out.Family(name, type, help);
    for (const auto& [m, s] : shadows) {
      for (const ShadowOutputSummary& o : s.outputs) {
        Labels labels = m->labels;
        labels.emplace_back("output", o.name);
        sample(labels, o);
      }
    }
  };
  per_output("ortserve_shadow_mismatch_total", "counter",
             "Compared answers whose output differs beyond shadow_tolerance (|shadow - served| > tolerance * "
             "max(1, |served|)), in a row's top-1 class, or in type, shape or non-floating values.",
             [&](const Labels& labels, const ShadowOutputSummary& o) {
               out.Sample("ortserve_shadow_mismatch_total", labels, o.mismatches);
             });
  per_output("ortserve_shadow_max_abs_difference", "histogram",
             "Per compared answer, the largest |shadow - served| over the output's elements.",
             [&](const Labels& labels, const ShadowOutputSummary& o) {
               out.HistogramSamples("ortserve_shadow_max_abs_difference", labels, o.abs_difference,
                                    kShadowDifferenceScale);
             });
  per_output("ortserve_shadow_top1_agreement", "gauge",
             "Share of the compared rows whose top-1 class agrees, for outputs with a class dimension.",
             [&](const Labels& labels, const ShadowOutputSummary& o) {
               if (!o.has_classes || o.top1_rows == 0) return;
               out.Sample("ortserve_shadow_top1_agreement", labels,
                          static_cast<double>(o.top1_agreeing) / static_cast<double>(o.top1_rows));
             });
}

// Progressive canaries: the split of unversioned traffic and the transitions.
void RenderRollouts(PrometheusText& out, const std::vector<RolloutStatus>& rollouts) {
  if (rollouts.empty()) return;
  out.Family("ortserve_rollout_weight", "gauge",
             "Percent of the requests naming no version sent to each version of a progressive rollout: the "
             "candidate's weight, and the rest for the stable version (shared by version_weights when set).");
  for (const RolloutStatus& r : rollouts) {
    if (!r.active) continue;
    out.Sample("ortserve_rollout_weight", {{"model", r.model}, {"version", std::to_string(r.candidate)}},
               static_cast<uint64_t>(r.weight));
    out.Sample("ortserve_rollout_weight", {{"model", r.model}, {"version", std::to_string(r.stable)}},
               static_cast<uint64_t>(100 - r.weight));
  }
  out.Family("ortserve_rollout_events_total", "counter",
             "Progressive rollout transitions, by event: started, advanced, paused, promoted, rolled_back.");
  for (const RolloutStatus& r : rollouts) {
    for (size_t i = 0; i < kRolloutEventCount; ++i) {
      out.Sample("ortserve_rollout_events_total",
                 {{"model", r.model}, {"event", RolloutEventName(static_cast<RolloutEvent>(i))}}, r.events[i]);
    }
  }
}

void RenderModelLoads(PrometheusText& out, const ModelLoadStats& loads) {
  out.Family("ortserve_model_loads_total", "counter",
             "Model loads (one per model, whatever its version count), by reason: startup, poll, explicit, "
             "on_demand.");
  for (size_t i = 0; i < kLoadReasonCount; ++i) {
    out.Sample("ortserve_model_loads_total", {{"reason", LoadReasonName(static_cast<LoadReason>(i))}},
               loads.loads[i]);
  }
  out.Family("ortserve_model_cold_start_seconds", "histogram",
             "--model-load-on-demand: from the first request for a model not loaded until its load succeeded.");
  out.HistogramSamples("ortserve_model_cold_start_seconds", {}, loads.cold_start, 1e9);
  out.Family("ortserve_model_evictions_total", "counter",
             "Models unloaded to make room for a load under --model-memory-budget (least recently used idle "
             "first; the log names each).");
  out.Sample("ortserve_model_evictions_total", {}, loads.evictions);
  out.Family("ortserve_model_memory_budget_bytes", "gauge", "--model-memory-budget in bytes (0: no budget).");
  out.Sample("ortserve_model_memory_budget_bytes", {}, loads.memory_budget);
  out.Family("ortserve_model_memory_bytes", "gauge",
             "Resident cost accounted to each loaded model version (1.25 x its version folder's bytes plus "
             "384 KiB; docs/many-models.md).");
  for (const VersionMemory& m : loads.memory) {
    out.Sample("ortserve_model_memory_bytes", {{"model", m.model}, {"version", m.version}}, m.bytes);
  }
}

}  // namespace

MetricsCollector::MetricsCollector(MetricsSources sources) : sources_(std::move(sources)) {}

std::string MetricsCollector::Render() const {
  if (!sources_.repository) return RenderMetrics(sources_, {}, {});
  return RenderMetrics(sources_, sources_.repository->Index(), sources_.repository->ReadyModels(),
                       sources_.repository->CacheUsage(), sources_.repository->Rollouts(),
                       sources_.repository->LoadStats());
}

std::string RenderMetrics(const MetricsSources& sources, const std::vector<ModelIndexEntry>& index,
                          const std::vector<std::shared_ptr<Model>>& ready_models,
                          const std::optional<ResponseCacheUsage>& cache,
                          const std::vector<RolloutStatus>& rollouts,
                          const std::optional<ModelLoadStats>& loads) {
  PrometheusText out;
  RenderServer(out, sources);
  RenderModelStates(out, index);
  std::vector<ModelView> models;
  for (const auto& m : ready_models) {
    ModelView view{m, {}};
    view.labels = {{"model", view.model->name()}, {"version", view.model->version()}};
    models.push_back(std::move(view));
  }
  RenderModelCounters(out, models);
  RenderModelGauges(out, models);
  RenderSequenceMetrics(out, models);
  if (cache) RenderResponseCache(out, *cache, models);
  RenderInputDrift(out, models);
  RenderShadow(out, models);
  RenderRollouts(out, rollouts);
  if (loads) RenderModelLoads(out, *loads);
  return out.Take();
}

}  // namespace ortserve::metrics
