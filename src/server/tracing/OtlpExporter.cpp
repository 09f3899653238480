#include "server/tracing/OtlpExporter.h"


#include <algorithm>
#include <optional>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include "core/ThreadName.h"

namespace ortserve::tracing {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

Result<OtlpEndpoint> ParseOtlpEndpoint(const std::string& endpoint) {
  const auto invalid = [&](std::string_view why) {
    return InvalidArgument("--trace-otlp-endpoint '" + endpoint + "'" + std::string(why));
  };
  constexpr std::string_view kHttp = "http://";
  const std::string_view url = endpoint;
  if (url.starts_with("https://")) {
    return invalid(
        ": https is not supported; send to an http:// endpoint (e.g. a local "
        "OpenTelemetry collector, which can forward over TLS)");
  }
  if (!url.starts_with(kHttp)) return invalid(" must be an http:// URL: http://host[:port][/path]");
  const std::string_view rest = url.substr(kHttp.size());
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  const std::string_view target =
      slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  OtlpEndpoint parsed;
  std::string_view port;
  if (authority.starts_with('[')) {  // [IPv6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return invalid(" has an unclosed '['");
    parsed.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return invalid(" has junk after ']'");
    if (!after.empty()) port = after.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    parsed.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (parsed.host.empty() || authority.find('@') != std::string_view::npos) {
    return invalid(" must name a host (and no user): http://host[:port][/path]");
  }
  if (port.empty()) port = "80";
  const bool digits =
      port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
    return invalid(" has port '" + std::string(port) + "', not in 1..65535");
  }
  parsed.port = std::string(port);
  parsed.target = target.empty() || target == "/" ? "/v1/traces" : std::string(target);
  return parsed;
}

// One HTTP/1.1 connection to the collector, kept alive between exports. Used
// only by the exporter thread. Every operation runs on a private io_context
// with the stream's expiry as its deadline, so nothing waits past it (name
// resolution excepted: it is the system resolver's, instant for addresses).
class OtlpExporter::Connection {
 public:
  explicit Connection(const OtlpEndpoint& endpoint)
      : endpoint_(endpoint), host_header_(HostHeader(endpoint)) {}

  // OK when the collector answered 2xx before `deadline`.
  Status Post(std::string body, SteadyClock::time_point deadline) {
    bhttp::request<bhttp::string_body> request{bhttp::verb::post, endpoint_.target, 11};
    request.set(bhttp::field::host, host_header_);
    request.set(bhttp::field::user_agent, "ortserve");
    request.set(bhttp::field::content_type, "application/json");
    request.keep_alive(true);
    request.body() = std::move(body);
    request.prepare_payload();
    const bool reused = stream_.has_value();
    bool answered = false;
    Status status = Exchange(request, deadline, &answered);
    // A kept-alive connection that the collector closed meanwhile fails
    // before any answer; that is worth one retry on a fresh connection (an
    // answer, even an error, is final: a retry could duplicate spans).
    if (!status.ok() && reused && !answered && SteadyClock::now() < deadline) {
      status = Exchange(request, deadline, &answered);
    }
    return status;
  }

 private:
  static std::string HostHeader(const OtlpEndpoint& e) {
    const bool ipv6 = e.host.find(':') != std::string::npos;
    return (ipv6 ? "[" + e.host + "]" : e.host) + ":" + e.port;
  }

  // Starts `operation` (which takes a completion handler) and runs the
  // io_context until it completes; returns its error.
  template <typename Operation>
  beast::error_code Run(Operation&& operation) {
    beast::error_code result = net::error::would_block;
    operation([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    ioc_.run();
    return result;
  }

  // One request and its answer, connecting first if needed. Any failure
  // closes the connection (its state is unknown).
  Status Exchange(const bhttp::request<bhttp::string_body>& request, SteadyClock::time_point deadline,
                  bool* answered) {
    Status status = ExchangeOnce(request, deadline, answered);
    if (!status.ok()) stream_.reset();
    return status;
  }

  Status ExchangeOnce(const bhttp::request<bhttp::string_body>& request, SteadyClock::time_point deadline,
                      bool* answered) {
    if (!stream_) {
      beast::error_code ec;
      tcp::resolver resolver(ioc_);
      const auto addresses = resolver.resolve(endpoint_.host, endpoint_.port, ec);
      if (ec) return Unavailable("cannot resolve " + endpoint_.host + ": " + ec.message());
      stream_.emplace(ioc_);
      stream_->expires_at(deadline);
      ec = Run([&](auto handler) { stream_->async_connect(addresses, std::move(handler)); });
      if (ec) return Unavailable("cannot connect to " + host_header_ + ": " + ec.message());
      stream_->socket().set_option(tcp::no_delay(true), ec);
    }
    stream_->expires_at(deadline);
    beast::error_code ec = Run([&](auto handler) { bhttp::async_write(*stream_, request, std::move(handler)); });
    if (ec) return Unavailable("sending to " + host_header_ + " failed: " + ec.message());
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(1 << 20);  // a collector answers a small ExportTraceServiceResponse
    buffer_.clear();
    ec = Run([&](auto handler) { bhttp::async_read(*stream_, buffer_, parser, std::move(handler)); });
    if (ec) return Unavailable("reading the answer of " + host_header_ + " failed: " + ec.message());
    *answered = true;
    const auto& response = parser.get();
    if (!response.keep_alive()) stream_.reset();
    const unsigned code = response.result_int();
    if (code < 200 || code >= 300) {
      return Unavailable(host_header_ + endpoint_.target + " answered HTTP " + std::to_string(code) + ": " +
                         response.body().substr(0, 200));
    }
    return Status::Ok();
  }

  const OtlpEndpoint endpoint_;
  const std::string host_header_;
  net::io_context ioc_{1};
  std::optional<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
};

Result<std::unique_ptr<OtlpExporter>> OtlpExporter::Create(OtlpExporterOptions options) {
  auto endpoint = ParseOtlpEndpoint(options.endpoint);
  if (!endpoint.ok()) return endpoint.status();
  if (options.buffer_spans < 1) return InvalidArgument("--trace-buffer-spans must be at least 1");
  if (options.max_export_spans < 1) return InvalidArgument("OTLP max_export_spans must be at least 1");
  if (options.export_interval.count() <= 0 || options.export_timeout.count() <= 0) {
    return InvalidArgument("OTLP export interval and timeout must be positive");
  }
  return std::unique_ptr<OtlpExporter>(new OtlpExporter(std::move(options), std::move(endpoint).value()));
}

OtlpExporter::OtlpExporter(OtlpExporterOptions options, OtlpEndpoint endpoint)
    : options_(std::move(options)), endpoint_(std::move(endpoint)) {
  buffer_.reserve(std::min<size_t>(options_.buffer_spans, 1024));
  thread_ = std::thread([this] {
    SetCurrentThreadName("otlp-export");
    Run();
  });
}

OtlpExporter::~OtlpExporter() { Shutdown(std::chrono::milliseconds(0)); }

void OtlpExporter::Push(std::span<Span> spans) {
  std::lock_guard lock(mu_);
  if (stopping_) return;  // after shutdown nobody would ever see them
  const size_t room = options_.buffer_spans - buffer_.size();
  const size_t taken = std::min(room, spans.size());
  for (size_t i = 0; i < taken; ++i) buffer_.push_back(std::move(spans[i]));
  counters_.dropped_buffer_full += spans.size() - taken;
  // Only a full export batch wakes the thread early; otherwise it wakes on
  // its interval, so a trickle of spans costs no wake-ups.
  if (buffer_.size() >= options_.max_export_spans && buffer_.size() - taken < options_.max_export_spans) {
    wake_.notify_one();
  }
}

TraceExportCounters OtlpExporter::counters() const {
  std::lock_guard lock(mu_);
  TraceExportCounters c = counters_;
  c.buffered = buffer_.size();
  return c;
}

void OtlpExporter::Shutdown(std::chrono::milliseconds timeout) {
  std::lock_guard serial(shutdown_mu_);
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      shutdown_deadline_ = SteadyClock::now() + timeout;
    }
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OtlpExporter::Run() {
  Connection connection(endpoint_);
  bool failing = false;  // log a failure once, and the recovery once
  size_t abandoned = 0;  // taken out but not sent by the shutdown deadline
  std::vector<Span> taken;
  std::unique_lock lock(mu_);
  while (abandoned == 0) {
    wake_.wait_for(lock, options_.export_interval,
                   [&] { return stopping_ || buffer_.size() >= options_.max_export_spans; });
    if (stopping_ && (buffer_.empty() || SteadyClock::now() >= shutdown_deadline_)) break;
    if (buffer_.empty()) continue;
    // Everything buffered leaves at once (a swap under the lock); it is sent
    // in batches of max_export_spans with the lock released.
    taken.clear();
    taken.swap(buffer_);
    const SteadyClock::time_point hard_deadline =
        stopping_ ? shutdown_deadline_ : SteadyClock::time_point::max();
    lock.unlock();
    abandoned = taken.size();
    for (size_t first = 0; first < taken.size(); first += options_.max_export_spans) {
      const SteadyClock::time_point now = SteadyClock::now();
      if (now >= hard_deadline) break;
      const std::span<const Span> batch = std::span<const Span>(taken).subspan(
          first, std::min(options_.max_export_spans, taken.size() - first));
      const Status status = connection.Post(EncodeOtlpJson(batch, options_.resource),
                                            std::min(now + options_.export_timeout, hard_deadline));
      abandoned -= batch.size();
      if (status.ok() && failing) spdlog::info("trace export to {} works again", options_.endpoint);
      if (!status.ok() && !failing) {
        spdlog::warn("trace export failed, spans are dropped until it works again: {}", status.message());
      }
      failing = !status.ok();
      std::lock_guard count(mu_);
      if (status.ok()) {
        counters_.exported += batch.size();
      } else {
        counters_.dropped_export_failed += batch.size();
        ++counters_.failed_exports;
      }
    }
    lock.lock();
  }
  abandoned += buffer_.size();
  if (abandoned > 0) spdlog::warn("trace exporter stopped: {} spans were not exported in time", abandoned);
  buffer_.clear();
}

}  // namespace ortserve::tracing
