// OtlpExporter against a small OTLP/HTTP collector written for the test (a
// Beast server on a free port): the JSON it receives, keep-alive, flushing on
// shutdown, and the drops (buffer full, failed exports) it counts without
// ever making Push wait. Waits are bounded polls, never timing assertions.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/src.hpp>  // header-only Boost.JSON, for this test only

#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "server/tracing/OtlpExporter.h"

namespace ortserve::tracing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

// Polls `done` for up to 30 s (a bound that only turns a hang into a failure).
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

struct ReceivedRequest {
  std::string method;
  std::string target;
  std::string content_type;
  std::string body;
};

// A minimal OTLP/HTTP collector: records every request; answers 200 ({}),
// answers 500, or (kHold) reads the request and keeps the connection silent
// until Release(), after which it closes connections without answering.
class TestCollector {
 public:
  enum class Mode { kAnswer200, kAnswer500, kHold };

  explicit TestCollector(Mode mode) : mode_(mode), acceptor_(ioc_, {net::ip::make_address("127.0.0.1"), 0}) {
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~TestCollector() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      released_ = true;
    }
    cv_.notify_all();
    // Wake the blocking accept with a connection of our own.
    boost::system::error_code ec;
    tcp::socket wake(ioc_);
    wake.connect(acceptor_.local_endpoint(), ec);
    accept_thread_.join();
    for (std::thread& t : connection_threads_) t.join();
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }

  std::vector<ReceivedRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  size_t connections() const {
    std::lock_guard lock(mu_);
    return connections_;
  }
  bool WaitForRequests(size_t n) {
    return Eventually([&] { return requests().size() >= n; });
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  void AcceptLoop() {
    for (;;) {
      tcp::socket socket(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (ec) continue;
      ++connections_;
      connection_threads_.emplace_back([this, s = std::move(socket)]() mutable { Serve(std::move(s)); });
    }
  }

  void Serve(tcp::socket socket) {
    beast::flat_buffer buffer;
    for (;;) {
      bhttp::request<bhttp::string_body> request;
      boost::system::error_code ec;
      bhttp::read(socket, buffer, request, ec);
      if (ec) return;
      {
        std::unique_lock lock(mu_);
        requests_.push_back({std::string(request.method_string()), std::string(request.target()),
                             std::string(request[bhttp::field::content_type]), request.body()});
        if (mode_ == Mode::kHold) {
          cv_.wait(lock, [&] { return released_; });
          return;  // closes the connection without an answer
        }
      }
      bhttp::response<bhttp::string_body> response{
          mode_ == Mode::kAnswer200 ? bhttp::status::ok : bhttp::status::internal_server_error, 11};
      response.set(bhttp::field::content_type, "application/json");
      response.body() = mode_ == Mode::kAnswer200 ? "{}" : "{\"error\":\"test collector says no\"}";
      response.keep_alive(request.keep_alive());
      response.prepare_payload();
      bhttp::write(socket, response, ec);
      if (ec || !request.keep_alive()) return;
    }
  }

  const Mode mode_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::thread accept_thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ReceivedRequest> requests_;  // guarded by mu_
  size_t connections_ = 0;                 // guarded by mu_
  bool released_ = false;                  // guarded by mu_
  bool stopping_ = false;                  // guarded by mu_
  std::list<std::thread> connection_threads_;  // guarded by mu_ until the accept thread is joined
};

Span MakeSpan(const std::string& name, bool with_parent = false) {
  Span span;
  span.context = {RandomTraceId(), RandomSpanId()};
  if (with_parent) span.parent_span_id = RandomSpanId();
  span.name = name;
  span.kind = SpanKind::kServer;
  span.start_unix_ns = 1'700'000'000'000'000'000ull;
  span.end_unix_ns = 1'700'000'000'001'000'000ull;
  span.attributes = {{"ortserve.model", std::string("m\"odel\n")}, {"http.response.status_code", int64_t{503}}};
  span.error = true;
  return span;
}

void PushOne(OtlpExporter& exporter, Span span) { exporter.Push(std::span<Span>(&span, 1)); }

std::unique_ptr<OtlpExporter> MakeExporter(const std::string& endpoint, size_t buffer_spans,
                                           size_t max_export_spans, std::chrono::milliseconds interval,
                                           std::chrono::milliseconds timeout = 30s) {
  auto exporter = OtlpExporter::Create({.endpoint = endpoint,
                                        .buffer_spans = buffer_spans,
                                        .max_export_spans = max_export_spans,
                                        .export_interval = interval,
                                        .export_timeout = timeout,
                                        .resource = {.service_name = "ortserve", .service_version = "9.9.9"}});
  EXPECT_TRUE(exporter.ok()) << exporter.status().message();
  return std::move(exporter).value();
}

std::string Url(uint16_t port, const std::string& path = "") {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

// A TCP port with nothing listening on it (it was free a moment ago).
uint16_t ClosedPort() {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, {net::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

const json::value* FindAttribute(const json::array& attributes, const std::string& key) {
  for (const json::value& a : attributes) {
    if (a.at("key").as_string() == key) return &a.at("value");
  }
  return nullptr;
}

TEST(ParseOtlpEndpoint, AcceptsHttpUrlsOnly) {
  auto plain = ParseOtlpEndpoint("http://collector:4318");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->host, "collector");
  EXPECT_EQ(plain->port, "4318");
  EXPECT_EQ(plain->target, "/v1/traces");
  auto with_path = ParseOtlpEndpoint("http://10.0.0.1/custom/traces?x=1");
  ASSERT_TRUE(with_path.ok());
  EXPECT_EQ(with_path->port, "80");
  EXPECT_EQ(with_path->target, "/custom/traces?x=1");
  auto ipv6 = ParseOtlpEndpoint("http://[::1]:4318/");
  ASSERT_TRUE(ipv6.ok());
  EXPECT_EQ(ipv6->host, "::1");
  EXPECT_EQ(ipv6->target, "/v1/traces");

  auto https = ParseOtlpEndpoint("https://collector:4318");
  ASSERT_FALSE(https.ok());
  EXPECT_NE(https.status().message().find("https is not supported"), std::string::npos);
  EXPECT_NE(https.status().message().find("https://collector:4318"), std::string::npos);
  for (const char* bad : {"collector:4318", "grpc://collector:4317", "http://", "http://:4318", "http://host:0",
                          "http://host:99999", "http://host:12ab", "http://user@host:4318", "http://[::1"}) {
    EXPECT_FALSE(ParseOtlpEndpoint(bad).ok()) << bad;
  }
}

TEST(OtlpExporter, SendsWellFormedOtlpJsonOnOneKeptAliveConnection) {
  TestCollector collector(TestCollector::Mode::kAnswer200);
  auto exporter = MakeExporter(Url(collector.port()), 100, 512, 20ms);
  std::vector<Span> spans = {MakeSpan("first", true), MakeSpan("second"), MakeSpan("third")};
  spans[1].kind = SpanKind::kInternal;
  spans[1].error = false;
  spans[1].links = {spans[0].context, spans[2].context};
  const std::vector<Span> sent = spans;
  exporter->Push(spans);

  ASSERT_TRUE(collector.WaitForRequests(1));
  ASSERT_TRUE(Eventually([&] { return exporter->counters().exported == 3; }));
  const ReceivedRequest received = collector.requests().at(0);
  EXPECT_EQ(received.method, "POST");
  EXPECT_EQ(received.target, "/v1/traces");
  EXPECT_EQ(received.content_type, "application/json");

  boost::system::error_code ec;
  const json::value body = json::parse(received.body, ec);
  ASSERT_FALSE(ec) << "not JSON: " << received.body;
  const json::object& resource_spans = body.at("resourceSpans").as_array().at(0).as_object();
  const json::array& resource_attributes = resource_spans.at("resource").at("attributes").as_array();
  ASSERT_NE(FindAttribute(resource_attributes, "service.name"), nullptr);
  EXPECT_EQ(FindAttribute(resource_attributes, "service.name")->at("stringValue").as_string(), "ortserve");
  EXPECT_EQ(FindAttribute(resource_attributes, "service.version")->at("stringValue").as_string(), "9.9.9");
  const json::array& got = resource_spans.at("scopeSpans").as_array().at(0).at("spans").as_array();
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    const json::object& span = got[i].as_object();
    EXPECT_EQ(span.at("traceId").as_string(), sent[i].context.trace_id.Hex());
    EXPECT_EQ(span.at("spanId").as_string(), sent[i].context.span_id.Hex());
    EXPECT_EQ(span.at("name").as_string(), sent[i].name);
    EXPECT_EQ(span.at("kind").as_int64(), static_cast<int>(sent[i].kind));
    EXPECT_EQ(span.at("startTimeUnixNano").as_string(), "1700000000000000000");
    EXPECT_EQ(span.at("endTimeUnixNano").as_string(), "1700000000001000000");
    const json::array& attributes = span.at("attributes").as_array();
    EXPECT_EQ(FindAttribute(attributes, "ortserve.model")->at("stringValue").as_string(), "m\"odel\n");
    EXPECT_EQ(FindAttribute(attributes, "http.response.status_code")->at("intValue").as_string(), "503");
    if (sent[i].error) {
      EXPECT_EQ(span.at("status").at("code").as_int64(), 2);
    } else {
      EXPECT_TRUE(span.at("status").as_object().empty());
    }
  }
  EXPECT_EQ(got[0].at("parentSpanId").as_string(), sent[0].parent_span_id.Hex());
  EXPECT_FALSE(got[1].as_object().contains("parentSpanId"));  // a root span
  const json::array& links = got[1].at("links").as_array();
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0].at("traceId").as_string(), sent[0].context.trace_id.Hex());
  EXPECT_EQ(links[1].at("spanId").as_string(), sent[2].context.span_id.Hex());

  // A second export reuses the connection.
  PushOne(*exporter, MakeSpan("fourth"));
  ASSERT_TRUE(collector.WaitForRequests(2));
  ASSERT_TRUE(Eventually([&] { return exporter->counters().exported == 4; }));
  EXPECT_EQ(collector.connections(), 1u);
  const TraceExportCounters c = exporter->counters();
  EXPECT_EQ(c.dropped_buffer_full + c.dropped_export_failed + c.failed_exports, 0u);
}

TEST(OtlpExporter, SendsAtMostMaxExportSpansPerRequest) {
  TestCollector collector(TestCollector::Mode::kAnswer200);
  auto exporter = MakeExporter(Url(collector.port(), "/otlp/v1/traces"), 100, 2, 20ms);
  std::vector<Span> spans = {MakeSpan("a"), MakeSpan("b"), MakeSpan("c"), MakeSpan("d"), MakeSpan("e")};
  exporter->Push(spans);
  ASSERT_TRUE(Eventually([&] { return exporter->counters().exported == 5; }));
  size_t total = 0;
  for (const ReceivedRequest& r : collector.requests()) {
    EXPECT_EQ(r.target, "/otlp/v1/traces");
    const size_t n = json::parse(r.body).at("resourceSpans").at(0).at("scopeSpans").at(0).at("spans").as_array().size();
    EXPECT_LE(n, 2u);
    total += n;
  }
  EXPECT_EQ(total, 5u);
}

TEST(OtlpExporter, AFullBufferDropsAndCountsWhilePushNeverWaitsForTheCollector) {
  TestCollector collector(TestCollector::Mode::kHold);
  // Only a full export batch (2) wakes the exporter: the interval is an hour.
  auto exporter = MakeExporter(Url(collector.port()), /*buffer_spans=*/4, /*max_export_spans=*/2, 3600s);
  std::vector<Span> two = {MakeSpan("1"), MakeSpan("2")};
  exporter->Push(two);
  // The exporter has taken both and now waits for an answer that never comes.
  ASSERT_TRUE(collector.WaitForRequests(1));

  // Each Push returns although the exporter is stuck: 4 fit, 6 are dropped.
  for (int i = 0; i < 10; ++i) PushOne(*exporter, MakeSpan("more"));
  TraceExportCounters c = exporter->counters();
  EXPECT_EQ(c.buffered, 4u);
  EXPECT_EQ(c.dropped_buffer_full, 6u);
  EXPECT_EQ(c.exported, 0u);

  // The collector hangs up without answering: those exports fail, and every
  // span is accounted for.
  collector.Release();
  ASSERT_TRUE(Eventually([&] {
    const TraceExportCounters now = exporter->counters();
    return now.dropped_export_failed + now.exported == 6;
  }));
  c = exporter->counters();
  EXPECT_EQ(c.dropped_export_failed, 6u);
  EXPECT_EQ(c.dropped_buffer_full, 6u);
  EXPECT_EQ(c.buffered, 0u);
  EXPECT_GE(c.failed_exports, 2u);  // the held export and at least one for the other 4
}

TEST(OtlpExporter, AnUnreachableCollectorCostsDroppedSpansOnly) {
  auto exporter = MakeExporter(Url(ClosedPort()), /*buffer_spans=*/8, 512, 10ms);
  std::vector<Span> three = {MakeSpan("a"), MakeSpan("b"), MakeSpan("c")};
  exporter->Push(three);
  ASSERT_TRUE(Eventually([&] { return exporter->counters().dropped_export_failed == 3; }));
  EXPECT_GE(exporter->counters().failed_exports, 1u);

  std::vector<Span> many(20, MakeSpan("burst"));
  exporter->Push(many);  // 8 fit, 12 are dropped at once
  EXPECT_EQ(exporter->counters().dropped_buffer_full, 12u);
  ASSERT_TRUE(Eventually([&] { return exporter->counters().dropped_export_failed == 3 + 8; }));
  EXPECT_EQ(exporter->counters().exported, 0u);
}

TEST(OtlpExporter, ANon2xxAnswerIsAFailedExport) {
  TestCollector collector(TestCollector::Mode::kAnswer500);
  auto exporter = MakeExporter(Url(collector.port()), 100, 512, 10ms);
  std::vector<Span> two = {MakeSpan("a"), MakeSpan("b")};
  exporter->Push(two);
  ASSERT_TRUE(Eventually([&] { return exporter->counters().failed_exports == 1; }));
  EXPECT_EQ(exporter->counters().dropped_export_failed, 2u);
  EXPECT_EQ(collector.requests().size(), 1u);  // an answer is final: no retry
}

TEST(OtlpExporter, ShutdownFlushesWhatIsBuffered) {
  TestCollector collector(TestCollector::Mode::kAnswer200);
  auto exporter = MakeExporter(Url(collector.port()), 100, 512, 3600s);
  std::vector<Span> five(5, MakeSpan("late"));
  exporter->Push(five);
  EXPECT_TRUE(collector.requests().empty());  // below a full batch, before the interval
  exporter->Shutdown(30s);
  EXPECT_EQ(exporter->counters().exported, 5u);
  ASSERT_EQ(collector.requests().size(), 1u);
  PushOne(*exporter, MakeSpan("after shutdown"));  // ignored, harmlessly
  EXPECT_EQ(exporter->counters().buffered, 0u);
}

}  // namespace
}  // namespace ortserve::tracing
