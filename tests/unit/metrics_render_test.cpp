// The Prometheus text the metrics endpoint serves: escaping, number format,
// /proc parsing, and a full rendering checked line by line against the
// grammar of the text format 0.0.4; plus the listener itself on a free port.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "TestTensors.h"
#include "fakes/FakeModel.h"
#include "server/metrics/MetricsCollector.h"
#include "server/metrics/MetricsServer.h"
#include "server/metrics/ProcessStats.h"
#include "server/metrics/PrometheusText.h"

namespace ortserve::metrics {
namespace {

using ::testing::HasSubstr;

struct Family {
  std::string type;
  bool has_help = false;
};

// Checks `text` against the exposition grammar; returns the samples as
// "name{labels}" -> value text. Fails the test on the first bad line.
std::map<std::string, std::string> ParseStrict(const std::string& text) {
  static const std::regex kHelp(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$)");
  static const std::regex kType(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  static const std::regex kSample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")"
      R"((?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? )"
      R"(([+-]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|Inf)|NaN)$)");
  std::map<std::string, std::string> samples;
  std::map<std::string, Family> families;
  std::set<std::string> closed;  // families whose samples are over
  std::string current;
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::smatch m;
    if (std::regex_match(line, m, kHelp)) {
      EXPECT_EQ(families.count(m[1]), 0u) << "family declared twice, line " << number << ": " << line;
      if (!current.empty()) closed.insert(current);
      current = m[1];
      families[current].has_help = true;
    } else if (std::regex_match(line, m, kType)) {
      EXPECT_EQ(m[1].str(), current) << "TYPE without its HELP, line " << number;
      families[current].type = m[2];
    } else if (std::regex_match(line, m, kSample)) {
      const std::string name = m[1];
      const Family& f = families[current];
      std::set<std::string> allowed = {current};
      if (f.type == "histogram") allowed = {current + "_bucket", current + "_sum", current + "_count"};
      EXPECT_EQ(allowed.count(name), 1u) << "sample outside its family, line " << number << ": " << line;
      EXPECT_EQ(closed.count(current), 0u);
      const std::string key = name + m[2].str();
      EXPECT_EQ(samples.count(key), 0u) << "duplicate sample, line " << number << ": " << line;
      samples[key] = m[3];
    } else {
      ADD_FAILURE() << "line " << number << " is not in the text format: '" << line << "'";
    }
  }
  return samples;
}

TEST(PrometheusText, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeHelp("x\\y\nz\""), "x\\\\y\\nz\"");
  PrometheusText out;
  out.Family("m_total", "counter", "help with \\ and\nnewline");
  out.Sample("m_total", {{"model", "we\"ird\\name\n"}}, uint64_t{7});
  EXPECT_EQ(out.text(),
            "# HELP m_total help with \\\\ and\\nnewline\n# TYPE m_total counter\n"
            "m_total{model=\"we\\\"ird\\\\name\\n\"} 7\n");
  ParseStrict(out.text());
}

TEST(PrometheusText, FormatsValues) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(12345), "12345");
  EXPECT_EQ(FormatValue(2.5), "2.5");
  EXPECT_EQ(FormatValue(50'000 / 1e9), "5e-05");
  EXPECT_EQ(FormatValue(1'000'000 / 1e9), "0.001");
  EXPECT_EQ(FormatValue(100'000 / 1e9), "0.0001");
  EXPECT_EQ(FormatValue(500'000 / 1e9), "0.0005");
  EXPECT_EQ(FormatValue(1.2e-7), "1.2e-07");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatValue(0.0 / 0.0), "NaN");
}

TEST(PrometheusText, HistogramIsCumulativeWithInfSumAndCount) {
  Histogram h{1'000, 2'000};
  h.Observe(500);
  h.Observe(1'500);
  h.Observe(5'000);
  PrometheusText out;
  out.Family("d_seconds", "histogram", "d");
  out.HistogramSamples("d_seconds", {{"model", "m"}}, h.Read(), 1e9);
  auto s = ParseStrict(out.text());
  EXPECT_EQ(s["d_seconds_bucket{model=\"m\",le=\"1e-06\"}"], "1");
  EXPECT_EQ(s["d_seconds_bucket{model=\"m\",le=\"2e-06\"}"], "2");
  EXPECT_EQ(s["d_seconds_bucket{model=\"m\",le=\"+Inf\"}"], "3");
  EXPECT_EQ(s["d_seconds_count{model=\"m\"}"], "3");
  EXPECT_EQ(s["d_seconds_sum{model=\"m\"}"], "7e-06");
}

TEST(ProcessStats, ParsesProcStatWithSpacesInComm) {
  // Fields from man 5 proc; comm "(my (odd) prog)" has spaces and parentheses.
  std::string stat = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 ";
  stat += "250 150 0 0 20 0 17 0 5000 123456789 2048 18446744073709551615\n";
  // utime=250 stime=150 (fields 14, 15), threads=17 (20), starttime=5000 (22), rss=2048 (24).
  const ProcessStats p = ParseProcStat(stat, 1'700'000'000, 100, 4096);
  ASSERT_TRUE(p.cpu_seconds && p.threads && p.resident_bytes && p.start_time_seconds);
  EXPECT_DOUBLE_EQ(*p.cpu_seconds, 4.0);
  EXPECT_EQ(*p.threads, 17u);
  EXPECT_EQ(*p.resident_bytes, 2048u * 4096u);
  EXPECT_DOUBLE_EQ(*p.start_time_seconds, 1'700'000'050.0);
  EXPECT_FALSE(ParseProcStat("garbage", 0, 100, 4096).cpu_seconds);
}

TEST(ProcessStats, ReadsThisProcess) {
  const ProcessStats p = ReadProcessStats();
  ASSERT_TRUE(p.threads && p.resident_bytes && p.cpu_seconds && p.start_time_seconds);
  EXPECT_GE(*p.threads, 1u);
  EXPECT_GT(*p.resident_bytes, 0u);
  EXPECT_GT(*p.start_time_seconds, 1.5e9);
}

TEST(RenderMetrics, WholeExpositionParsesAndCarriesTheCounters) {
  auto model = std::make_shared<FakeModel>(FakeModel::Options{.name = "dense\"net",
                                                              .version = "2",
                                                              .reply = FakeModel::Reply::kFail,
                                                              .stats_max_batch_size = 8,
                                                              .queue_depth = 3,
                                                              .busy_instances = 1});
  ModelStatistics& st = model->stats();
  for (int i = 0; i < 5; ++i) st.CountOutcome(RequestOutcome::kSuccess);
  st.CountOutcome(RequestOutcome::kInvalidInput);
  st.CountOutcome(RequestOutcome::kRejected);
  st.CountOutcome(RequestOutcome::kRejected);
  for (uint64_t ns : {40'000ull, 300'000ull, 2'000'000ull, 2'000'000ull, 20'000'000'000ull}) st.request_duration.Observe(ns);
  st.batch_size.Observe(3);
  st.inference_count = 5;
  st.execution_count = 2;
  st.load_duration_ns = 1'500'000'000;

  MetricsSources sources;
  sources.version = "0.1.0";
  sources.onnxruntime_version = "1.29.0";
  sources.execution_providers = "CPUExecutionProvider";
  sources.allocator = "jemalloc 5.3.0";
  sources.http_open_connections = [] { return size_t{4}; };
  sources.grpc_active_calls = [] { return size_t{2}; };
  sources.grpc_open_connections = [] { return size_t{6}; };
  sources.grpc_rejected_connections = [] { return uint64_t{9}; };
  sources.trace_export = [] {
    return tracing::TraceExportCounters{
        .exported = 7, .dropped_buffer_full = 3, .dropped_export_failed = 5, .failed_exports = 1, .buffered = 2};
  };
  std::vector<ModelIndexEntry> index = {{"broken", "", ModelState::kUnavailable, "no versions"},
                                        {"dense\"net", "2", ModelState::kReady, ""}};
  const std::string text = RenderMetrics(sources, index, {model});
  auto s = ParseStrict(text);

  const std::string m = "model=\"dense\\\"net\",version=\"2\"";
  EXPECT_EQ(s["ortserve_requests_total{" + m + ",outcome=\"success\"}"], "5");
  EXPECT_EQ(s["ortserve_requests_total{" + m + ",outcome=\"invalid_input\"}"], "1");
  EXPECT_EQ(s["ortserve_requests_total{" + m + ",outcome=\"rejected\"}"], "2");
  EXPECT_EQ(s["ortserve_requests_total{" + m + ",outcome=\"timeout\"}"], "0");
  EXPECT_EQ(s["ortserve_inferences_total{" + m + "}"], "5");
  EXPECT_EQ(s["ortserve_executions_total{" + m + "}"], "2");
  EXPECT_EQ(s["ortserve_pending_requests{" + m + "}"], "3");
  EXPECT_EQ(s["ortserve_busy_instances{" + m + "}"], "1");
  EXPECT_EQ(s["ortserve_model_load_duration_seconds{" + m + "}"], "1.5");
  EXPECT_EQ(s["ortserve_request_duration_seconds_bucket{" + m + ",le=\"5e-05\"}"], "1");
  EXPECT_EQ(s["ortserve_request_duration_seconds_bucket{" + m + ",le=\"0.0025\"}"], "4");
  EXPECT_EQ(s["ortserve_request_duration_seconds_bucket{" + m + ",le=\"10\"}"], "4");
  EXPECT_EQ(s["ortserve_request_duration_seconds_bucket{" + m + ",le=\"+Inf\"}"], "5");
  EXPECT_EQ(s["ortserve_request_duration_seconds_count{" + m + "}"], "5");
  EXPECT_EQ(s["ortserve_batch_size_bucket{" + m + ",le=\"4\"}"], "1");
  EXPECT_EQ(s["ortserve_queue_duration_seconds_count{" + m + "}"], "0");
  EXPECT_EQ(s["ortserve_model_state{model=\"broken\",version=\"\",state=\"UNAVAILABLE\"}"], "1");
  EXPECT_EQ(s["ortserve_model_state{model=\"broken\",version=\"\",state=\"READY\"}"], "0");
  EXPECT_EQ(s["ortserve_model_state{" + m + ",state=\"READY\"}"], "1");
  EXPECT_EQ(s["ortserve_open_connections{protocol=\"http\"}"], "4");
  EXPECT_EQ(s["ortserve_open_connections{protocol=\"grpc\"}"], "6");
  EXPECT_EQ(s["ortserve_connections_rejected_total{protocol=\"grpc\"}"], "9");
  EXPECT_EQ(s["ortserve_active_calls{protocol=\"grpc\"}"], "2");
  EXPECT_EQ(s["ortserve_trace_spans_exported_total"], "7");
  EXPECT_EQ(s["ortserve_trace_spans_dropped_total{reason=\"buffer_full\"}"], "3");
  EXPECT_EQ(s["ortserve_trace_spans_dropped_total{reason=\"export_failed\"}"], "5");
  EXPECT_EQ(s["ortserve_trace_export_failures_total"], "1");
  EXPECT_EQ(s["ortserve_trace_buffered_spans"], "2");
  EXPECT_EQ(s["ortserve_build_info{version=\"0.1.0\",onnxruntime_version=\"1.29.0\","
              "execution_providers=\"CPUExecutionProvider\",allocator=\"jemalloc 5.3.0\"}"],
            "1");
  EXPECT_EQ(s.count("process_cpu_seconds_total"), 1u);
  EXPECT_EQ(s.count("process_resident_memory_bytes"), 1u);
  EXPECT_EQ(s.count("process_threads"), 1u);
  EXPECT_EQ(s.count("process_start_time_seconds"), 1u);
  EXPECT_THAT(text, HasSubstr("# TYPE ortserve_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ortserve_request_duration_seconds histogram\n"));
}

TEST(RenderMetrics, NoModelsStillDeclaresFamilies) {
  const std::string text = RenderMetrics(MetricsSources{}, {}, {});
  auto s = ParseStrict(text);
  EXPECT_THAT(text, HasSubstr("# TYPE ortserve_requests_total counter"));
  EXPECT_EQ(s.count("ortserve_open_connections{protocol=\"http\"}"), 0u);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("ortserve_trace_")));  // tracing off: no trace series
}

TEST(RenderMetrics, RolloutWeightsAndEvents) {
  RolloutStatus active;
  active.model = "m";
  active.active = true;
  active.stable = 1;
  active.candidate = 2;
  active.weight = 20;
  active.events[static_cast<size_t>(RolloutEvent::kStarted)] = 1;
  active.events[static_cast<size_t>(RolloutEvent::kAdvanced)] = 2;
  RolloutStatus inactive;  // fewer than two READY versions: events only
  inactive.model = "solo";
  const std::string text = RenderMetrics(MetricsSources{}, {}, {}, std::nullopt, {active, inactive});
  auto s = ParseStrict(text);
  EXPECT_EQ(s.at("ortserve_rollout_weight{model=\"m\",version=\"2\"}"), "20");
  EXPECT_EQ(s.at("ortserve_rollout_weight{model=\"m\",version=\"1\"}"), "80");
  EXPECT_EQ(s.at("ortserve_rollout_events_total{model=\"m\",event=\"advanced\"}"), "2");
  EXPECT_EQ(s.at("ortserve_rollout_events_total{model=\"solo\",event=\"rolled_back\"}"), "0");
  EXPECT_EQ(text.find("ortserve_rollout_weight{model=\"solo\""), std::string::npos);
  EXPECT_THAT(RenderMetrics(MetricsSources{}, {}, {}), ::testing::Not(HasSubstr("ortserve_rollout_")));
}

TEST(MetricsRender, ModelLoadsByReasonAndColdStarts) {
  ModelLoadStats loads;
  loads.loads[static_cast<size_t>(LoadReason::kOnDemand)] = 3;
  loads.loads[static_cast<size_t>(LoadReason::kStartup)] = 1;
  Histogram cold = Histogram::Durations();
  cold.Observe(20'000'000);  // 20 ms
  cold.Observe(3'000'000'000);
  loads.cold_start = cold.Read();
  const std::string text = RenderMetrics(MetricsSources{}, {}, {}, std::nullopt, {}, loads);
  auto s = ParseStrict(text);
  EXPECT_EQ(s.at("ortserve_model_loads_total{reason=\"on_demand\"}"), "3");
  EXPECT_EQ(s.at("ortserve_model_loads_total{reason=\"startup\"}"), "1");
  EXPECT_EQ(s.at("ortserve_model_loads_total{reason=\"poll\"}"), "0");
  EXPECT_EQ(s.at("ortserve_model_cold_start_seconds_count"), "2");
  EXPECT_EQ(s.at("ortserve_model_cold_start_seconds_bucket{le=\"0.025\"}"), "1");
  EXPECT_THAT(RenderMetrics(MetricsSources{}, {}, {}), ::testing::Not(HasSubstr("ortserve_model_loads_total")));
}

// A raw HTTP/1.1 exchange with the listener; returns the whole response.
std::string Exchange(uint16_t port, const std::string& request) {
  namespace net = boost::asio;
  net::io_context ioc;
  net::ip::tcp::socket socket(ioc);
  socket.connect({net::ip::make_address("127.0.0.1"), port});
  net::write(socket, net::buffer(request));
  std::string response;
  boost::system::error_code ec;
  char buf[4096];
  for (;;) {
    const size_t n = socket.read_some(net::buffer(buf), ec);
    response.append(buf, n);
    if (ec) break;
  }
  return response;
}

TEST(MetricsServer, ServesGetMetricsOnly) {
  int renders = 0;
  auto server = MetricsServer::Create({.address = "127.0.0.1", .port = 0}, [&renders] {
    ++renders;
    return std::string("# HELP x_total x\n# TYPE x_total counter\nx_total 1\n");
  });
  ASSERT_TRUE(server.ok()) << server.status().message();
  ASSERT_TRUE((*server)->Start().ok());
  const uint16_t port = (*server)->port();
  ASSERT_NE(port, 0);

  const std::string ok = Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(ok, HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_THAT(ok, HasSubstr("\r\n\r\n# HELP x_total x\n"));
  EXPECT_EQ(renders, 1);

  const std::string missing = Exchange(port, "GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(missing, HasSubstr("HTTP/1.1 404 Not Found\r\n"));
  const std::string post = Exchange(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(post, HasSubstr("HTTP/1.1 405 Method Not Allowed\r\n"));
  EXPECT_THAT(post, HasSubstr("Allow: GET, HEAD\r\n"));
  EXPECT_EQ(renders, 1);

  // Keep-alive: two scrapes on one connection.
  const std::string two = Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics?x=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  size_t first = two.find("HTTP/1.1 200 OK");
  ASSERT_NE(first, std::string::npos);
  EXPECT_NE(two.find("HTTP/1.1 200 OK", first + 1), std::string::npos);
  EXPECT_EQ(renders, 3);

  (*server)->Stop();
  (*server)->Stop();  // idempotent
}

TEST(MetricsServer, RejectsBadAddressAndBusyPort) {
  auto bad = MetricsServer::Create({.address = "not-an-ip", .port = 0}, [] { return std::string(); });
  EXPECT_FALSE(bad.ok());
  auto first = MetricsServer::Create({.address = "127.0.0.1", .port = 0}, [] { return std::string(); });
  ASSERT_TRUE(first.ok() && (*first)->Start().ok());
  auto second = MetricsServer::Create({.address = "127.0.0.1", .port = (*first)->port()}, [] { return std::string(); });
  ASSERT_TRUE(second.ok());
  const Status st = (*second)->Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr(std::to_string((*first)->port())));
}

// A served version whose requests are shadowed: only shadow() matters here.
class ShadowedModel final : public Model {
 public:
  explicit ShadowedModel(std::shared_ptr<ShadowComparison> shadow) : shadow_(std::move(shadow)) {
    config_.set_name("m");
  }
  const std::string& name() const override { return config_.name(); }
  const std::string& version() const override { return version_; }
  const inference::ModelConfig& config() const override { return config_; }
  ModelStatistics& stats() override { return stats_; }
  bool ready() const override { return true; }
  void Infer(std::unique_ptr<InferenceRequest>) override {}
  size_t QueueDepth() const override { return 0; }
  const ShadowComparison* shadow() const override { return shadow_.get(); }

 private:
  inference::ModelConfig config_;
  std::string version_ = "1";
  ModelStatistics stats_{0};
  std::shared_ptr<ShadowComparison> shadow_;
};

using testing_util::Fp32;

TEST(RenderMetrics, ShadowComparisonPerServingVersionAndOutput) {
  ShadowConfig config;
  config.version = 2;
  config.tolerance = 0.1;
  auto shadow = std::make_shared<ShadowComparison>("m", "1", config, std::vector<std::string>{"logits", "score"}, 1,
                                                   nullptr);
  // logits: 0.5 off and the second row's class moves; score: equal.
  shadow->Compare({Fp32("logits", {2, 2}, {1, 0, 0, 1}), Fp32("score", {2, 1}, {3, 4})},
                  {Fp32("logits", {2, 2}, {1.5f, 0, 1, 0.5f}), Fp32("score", {2, 1}, {3, 4})});
  const std::vector<std::shared_ptr<Model>> models{std::make_shared<ShadowedModel>(shadow)};
  const std::string text = RenderMetrics(MetricsSources{}, {}, models);
  auto s = ParseStrict(text);
  EXPECT_EQ(s.at("ortserve_shadow_compared_total{model=\"m\",version=\"1\"}"), "1");
  EXPECT_EQ(s.at("ortserve_shadow_dropped_total{model=\"m\",version=\"1\"}"), "0");
  EXPECT_EQ(s.at("ortserve_shadow_failed_total{model=\"m\",version=\"1\"}"), "0");
  EXPECT_EQ(s.at("ortserve_shadow_mismatch_total{model=\"m\",version=\"1\",output=\"logits\"}"), "1");
  EXPECT_EQ(s.at("ortserve_shadow_mismatch_total{model=\"m\",version=\"1\",output=\"score\"}"), "0");
  EXPECT_EQ(s.at("ortserve_shadow_top1_agreement{model=\"m\",version=\"1\",output=\"logits\"}"), "0.5");
  EXPECT_EQ(s.count("ortserve_shadow_top1_agreement{model=\"m\",version=\"1\",output=\"score\"}"), 0u);
  EXPECT_EQ(s.at("ortserve_shadow_max_abs_difference_bucket{model=\"m\",version=\"1\",output=\"logits\",le=\"0.1\"}"),
            "0");
  EXPECT_EQ(s.at("ortserve_shadow_max_abs_difference_bucket{model=\"m\",version=\"1\",output=\"logits\",le=\"1\"}"),
            "1");
  EXPECT_EQ(s.at("ortserve_shadow_max_abs_difference_count{model=\"m\",version=\"1\",output=\"score\"}"), "1");
  EXPECT_THAT(RenderMetrics(MetricsSources{}, {}, {}), ::testing::Not(HasSubstr("ortserve_shadow_")));
}

}  // namespace
}  // namespace ortserve::metrics
