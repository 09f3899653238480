#include "server/metrics/MetricsServer.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <optional>
#include <thread>

#include "core/ThreadName.h"
#include "server/common/AcceptPacer.h"
#include "server/common/RefusedConnections.h"
#include "server/metrics/PrometheusText.h"

namespace ortserve::metrics {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kMaxRequestBody = 4096;  // a scrape has no body
constexpr size_t kFirstReadBytes = 4096;

// Counts a connection open for as long as it lives. The count belongs to the
// server's Impl and is touched on its I/O thread only.
class OpenConnection {
 public:
  explicit OpenConnection(size_t* open) : open_(open) { ++*open_; }
  ~OpenConnection() { --*open_; }
  OpenConnection(const OpenConnection&) = delete;
  OpenConnection& operator=(const OpenConnection&) = delete;

 private:
  size_t* open_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const std::function<std::string()>& render, const MetricsServerOptions& options,
          size_t* open_connections)
      : stream_(std::move(socket)), render_(render), options_(options), counted_(open_connections) {}

  void Start() { DoRead(); }

 private:
  // Up to the idle timeout for a request's first bytes, then up to the read
  // timeout for the rest of it.
  void DoRead() {
    if (buffer_.size() > 0) return ReadRequest();  // pipelined bytes: it has begun
    stream_.expires_after(options_.idle_timeout);
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();
                              self->buffer_.commit(n);
                              self->ReadRequest();
                            });
  }

  void ReadRequest() {
    parser_.emplace();
    parser_->body_limit(kMaxRequestBody);
    stream_.expires_after(options_.read_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec) return Close();
    const auto& req = parser_->get();
    response_.emplace();
    auto& res = *response_;
    res.version(req.version());
    res.keep_alive(req.keep_alive());
    beast::string_view target = req.target();
    target = target.substr(0, target.find('?'));
    if (target != "/metrics") {
      res.result(bhttp::status::not_found);
      res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
      res.body() = "not found: the metrics endpoint is GET /metrics\n";
    } else if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
      res.result(bhttp::status::method_not_allowed);
      res.set(bhttp::field::allow, "GET, HEAD");
      res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
      res.body() = "method not allowed: use GET /metrics\n";
    } else {
      res.result(bhttp::status::ok);
      res.set(bhttp::field::content_type,
              beast::string_view(kPrometheusContentType.data(), kPrometheusContentType.size()));
      res.body() = render_();
    }
    res.prepare_payload();
    if (req.method() == bhttp::verb::head) res.body().clear();  // Content-Length stays
    parser_.reset();
    bhttp::async_write(stream_, res, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->OnWrite(ec);
    });
  }

  void OnWrite(beast::error_code ec) {
    const bool keep_alive = response_->keep_alive();
    response_.reset();
    if (ec || !keep_alive) return Close();
    DoRead();
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  // Both owned by Impl, which outlives the I/O thread.
  const std::function<std::string()>& render_;
  const MetricsServerOptions& options_;
  OpenConnection counted_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<bhttp::response<bhttp::string_body>> response_;
};

}  // namespace

struct MetricsServer::Impl {
  MetricsServerOptions options;
  std::function<std::string()> render;
  // Before ioc: the sessions its handlers hold count down here when the
  // io_context is destroyed.
  size_t open_connections = 0;
  common::RefusedConnections rejected_connections{"metrics", "--metrics-max-connections", "closed unanswered"};
  net::io_context ioc{1};
  std::optional<tcp::acceptor> acceptor;
  std::optional<common::AcceptPacer> accept_pacer;
  std::thread thread;
  uint16_t bound_port = 0;
  bool started = false;
  bool stopped = false;

  void DoAccept() {
    acceptor->async_accept(ioc, [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) Serve(std::move(socket));
      accept_pacer->Next(ec, [this] {
        if (acceptor->is_open()) DoAccept();
      });
    });
  }

  // Over the limit a connection is closed unanswered: an answer would cost
  // the writes that the limit is there to save.
  void Serve(tcp::socket socket) {
    if (open_connections >= options.max_connections) {
      rejected_connections.Count(options.max_connections);
      return;  // the socket closes as it goes
    }
    beast::error_code opt_ec;
    socket.set_option(tcp::no_delay(true), opt_ec);
    std::make_shared<Session>(std::move(socket), render, options, &open_connections)->Start();
  }
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { Stop(); }

Result<std::unique_ptr<MetricsServer>> MetricsServer::Create(MetricsServerOptions options,
                                                             std::function<std::string()> render) {
  if (!render) return InvalidArgument("metrics server needs a render function");
  beast::error_code ec;
  net::ip::make_address(options.address, ec);
  if (ec) return InvalidArgument("invalid metrics address '" + options.address + "': " + ec.message());
  if (options.max_connections == 0) return InvalidArgument("metrics max_connections must be positive");
  if (options.idle_timeout.count() <= 0) return InvalidArgument("metrics idle_timeout must be positive");
  if (options.read_timeout.count() <= 0) return InvalidArgument("metrics read_timeout must be positive");
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->render = std::move(render);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

Status MetricsServer::Start() {
  Impl& s = *impl_;
  if (s.started) return InvalidArgument("metrics server already started");
  beast::error_code ec;
  const tcp::endpoint endpoint(net::ip::make_address(s.options.address, ec), s.options.port);
  s.acceptor.emplace(s.ioc);
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    s.acceptor.reset();
    return Unavailable("cannot listen on " + s.options.address + ":" + std::to_string(s.options.port) +
                       " for metrics: " + ec.message());
  }
  s.bound_port = s.acceptor->local_endpoint(ec).port();
  s.accept_pacer.emplace(s.acceptor->get_executor(), "metrics");
  s.started = true;
  s.DoAccept();
  s.thread = std::thread([&s] {
    SetCurrentThreadName("metrics-io");
    while (true) {
      try {
        s.ioc.run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("metrics: I/O thread caught an exception: {}", e.what());
      }
    }
  });
  return Status::Ok();
}

uint16_t MetricsServer::port() const { return impl_->bound_port; }

void MetricsServer::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  if (!s.started) return;
  // Closing the acceptor ends the accept loop; stop() abandons open
  // connections, whose handlers (and sockets) go with the io_context.
  net::post(s.ioc, [&s] {
    beast::error_code ec;
    s.acceptor->close(ec);
    s.accept_pacer->Cancel();
    s.ioc.stop();
  });
  s.thread.join();
  s.accept_pacer.reset();
  s.acceptor.reset();
}

uint64_t MetricsServer::RejectedConnections() const {
  return impl_->rejected_connections.count();
}

}  // namespace ortserve::metrics
