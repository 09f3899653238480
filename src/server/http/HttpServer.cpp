#include "server/http/HttpServer.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/ThreadName.h"
#include "repository/ModelRepository.h"
#include "server/common/AcceptPacer.h"
#include "server/http/ConnectionRejection.h"
#include "server/http/HttpServerCore.h"
#include "server/http/HttpService.h"
#include "server/http/HttpSession.h"
#include "server/http/IoThread.h"
#include "server/http/JsonWriter.h"
#include "server/http/ResponseHead.h"
#include "server/http/TlsContext.h"

namespace ortserve {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using http::AppendResponseHead;
using http::ConnectionRejection;
using http::HttpServerCore;
using http::HttpSession;
using http::IoThread;
using http::MakeTlsContext;
using http::RunIoThread;
using http::Socket;
using http::TlsStream;

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  ModelRepository* repository;
  std::shared_ptr<HttpServerCore> core = std::make_shared<HttpServerCore>();
  std::shared_ptr<http::HttpService> service;
  std::unique_ptr<net::ssl::context> tls;  // set with --http-use-ssl
  std::optional<tcp::acceptor> acceptor;
  // Paces the accept loop when accepting fails (out of descriptors).
  std::optional<common::AcceptPacer> accept_pacer;
  std::vector<std::thread> threads;
  uint16_t bound_port = 0;
  bool started = false;
  bool stopped = false;
  // The whole 503 answer of a connection over max_connections.
  std::shared_ptr<const std::string> over_limit_response;
  size_t next_ioc = 0;
  // The socket the pending accept fills, made on its connection's I/O thread.
  std::optional<Socket> accepting;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work;

  // A connection arrived while max_connections are open.
  void Reject(Socket socket) {
    core->rejected_connections.Count(options.max_connections);
    if (tls || core->rejections_lingering.load(std::memory_order_relaxed) >= ConnectionRejection::kMaxLingering) {
      // HTTPS: an answer would need a TLS handshake, the very work the limit saves.
      beast::error_code ec;
      socket.close(ec);
      return;
    }
    std::make_shared<ConnectionRejection>(core, std::move(socket), over_limit_response)->Start();
  }

  // The next connection's I/O thread (round robin; only the acceptor's
  // handler touches it).
  size_t NextIoThread() {
    const size_t i = next_ioc;
    next_ioc = (next_ioc + 1) % core->io_threads.size();
    return i;
  }

  void DoAccept() {
    IoThread* io_thread = core->io_threads[NextIoThread()].get();
    accepting.emplace(io_thread->ioc.get_executor());
    acceptor->async_accept(*accepting, [this, io_thread](beast::error_code ec) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      Socket socket = std::move(*accepting);
      if (!ec) Serve(std::move(socket), io_thread);
      accept_pacer->Next(ec, [this] {
        if (acceptor->is_open()) DoAccept();
      });
    });
  }

  // A connection just accepted: served, or refused over max_connections.
  void Serve(Socket socket, IoThread* io_thread) {
    if (core->connections.open() >= options.max_connections) return Reject(std::move(socket));
    // Session options live in Impl, which outlives every session's use
    // of them: sessions only run on the I/O threads, joined in Stop().
    // (An SSL object holds a reference on its SSL_CTX, so the TLS
    // context may go first.)
    if (tls) {
      std::make_shared<HttpSession<TlsStream>>(core, service, options, io_thread, std::move(socket), *tls)->Start();
    } else {
      std::make_shared<HttpSession<Socket>>(core, service, options, io_thread, std::move(socket))->Start();
    }
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Create(HttpServerOptions options, ModelRepository* repository) {
  if (!repository) return InvalidArgument("HttpServer needs a model repository");
  if (options.io_threads < 1 || options.io_threads > 1024)
    return InvalidArgument("http io_threads must be in [1, 1024], got " + std::to_string(options.io_threads));
  if (options.max_input_size == 0) return InvalidArgument("http max_input_size must be positive");
  if (options.max_header_bytes < 1024) return InvalidArgument("http max_header_bytes must be at least 1024");
  if (options.idle_timeout.count() <= 0) return InvalidArgument("http idle_timeout must be positive");
  if (options.read_timeout.count() <= 0) return InvalidArgument("http read_timeout must be positive");
  if (options.max_connections == 0) return InvalidArgument("http max_connections must be positive");
  if (options.max_body_chunks == 0) return InvalidArgument("http max_body_chunks must be positive");
  if (options.max_json_depth < 2 || options.max_json_depth > http::kMaxJsonDepthLimit) {
    return InvalidArgument("http max_json_depth must be in [2, " + std::to_string(http::kMaxJsonDepthLimit) +
                           "], got " + std::to_string(options.max_json_depth));
  }
  if (options.max_tensor_elements == 0) return InvalidArgument("http max_tensor_elements must be positive");
  beast::error_code ec;
  net::ip::make_address(options.address, ec);
  if (ec) return InvalidArgument("invalid http address '" + options.address + "': " + ec.message());

  auto impl = std::make_unique<Impl>();
  if (options.tls.enabled) {
    auto tls = MakeTlsContext(options.tls);
    if (!tls.ok()) return tls.status();
    impl->tls = std::move(tls).value();
  }
  impl->options = std::move(options);
  impl->repository = repository;
  {
    http::HttpResponse over_limit;
    over_limit.status = 503;
    over_limit.body = http::ErrorJson("the server has " + std::to_string(impl->options.max_connections) +
                                      " open HTTP connections, its limit (--http-max-connections); retry later");
    std::string response;
    AppendResponseHead(&response, over_limit, /*keep_alive=*/false, "Retry-After: 1\r\n");
    impl->over_limit_response = std::make_shared<const std::string>(response + over_limit.body);
  }
  if (impl->options.access_policy) impl->core->auth_headers = impl->options.access_policy->HeaderNames();
  impl->service = std::make_shared<http::HttpService>(
      http::HttpServiceOptions{
          .max_input_size = impl->options.max_input_size,
          .decode = {.max_tensor_bytes = impl->options.max_input_size,
                     .max_tensor_elements = impl->options.max_tensor_elements,
                     .max_json_depth = impl->options.max_json_depth},
          .strict_readiness = impl->options.strict_readiness,
          .server_version = impl->options.server_version,
          .access_policy = impl->options.access_policy,
          .allow_unauthenticated_model_control = impl->options.allow_unauthenticated_model_control,
          .tracer = impl->options.tracer,
          .shared_memory = impl->options.shared_memory,
          .runtime_settings = impl->options.runtime_settings,
          .quotas = impl->options.quotas.quotas},
      repository);
  impl->service->set_access_log(impl->options.access_log);
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.started) return InvalidArgument("HttpServer already started");
  beast::error_code ec;
  const auto address = net::ip::make_address(s.options.address, ec);
  const tcp::endpoint endpoint(address, s.options.port);
  const std::string where = s.options.address + ":" + std::to_string(s.options.port);
  for (int i = 0; i < s.options.io_threads; ++i) s.core->io_threads.push_back(std::make_unique<IoThread>());
  s.acceptor.emplace(s.core->io_threads[0]->ioc);
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    s.acceptor.reset();
    s.core->io_threads.clear();  // a later Start() makes them afresh
    return Unavailable("cannot listen on " + where + ": " + ec.message());
  }
  s.bound_port = s.acceptor->local_endpoint(ec).port();
  s.accept_pacer.emplace(s.acceptor->get_executor(), "http");
  s.started = true;
  for (auto& io : s.core->io_threads) s.work.push_back(net::make_work_guard(io->ioc));
  s.DoAccept();
  s.threads.reserve(static_cast<size_t>(s.options.io_threads));
  for (int i = 0; i < s.options.io_threads; ++i) {
    s.threads.emplace_back([core = s.core, i] {
      SetCurrentThreadName("http-io-" + std::to_string(i));
      IoThread& io = *core->io_threads[static_cast<size_t>(i)];
      while (true) {
        try {
          RunIoThread(io);
          return;
        } catch (const std::exception& e) {
          spdlog::error("http: I/O thread caught an exception: {}", e.what());
        }
      }
    });
  }
  return Status::Ok();
}

uint16_t HttpServer::port() const { return impl_->bound_port; }

size_t HttpServer::OpenConnections() const {
  return impl_->core->connections.open();
}

uint64_t HttpServer::RejectedConnections() const {
  return impl_->core->rejected_connections.count();
}

void HttpServer::StopAccepting() {
  Impl& s = *impl_;
  s.service->StopAccepting();
  if (!s.acceptor) return;
  std::promise<void> done;
  auto closed = done.get_future();
  net::dispatch(s.acceptor->get_executor(), [&s, &done] {
    beast::error_code ec;
    if (s.acceptor->is_open()) s.acceptor->close(ec);
    if (s.accept_pacer) s.accept_pacer->Cancel();
    done.set_value();
  });
  if (s.started && !s.stopped) closed.wait();
}

void HttpServer::MarkNotReady() { impl_->service->MarkNotReady(); }

bool HttpServer::WaitForInFlight(std::chrono::milliseconds timeout) {
  return impl_->service->in_flight()->WaitForZero(timeout);
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  if (!s.started) return;
  s.service->StopAccepting();
  {
    std::promise<void> done;
    auto closed = done.get_future();
    net::post(s.acceptor->get_executor(), [&s, &done] {
      beast::error_code ec;
      if (s.acceptor->is_open()) s.acceptor->close(ec);
      s.accept_pacer->Cancel();
      done.set_value();
    });
    closed.wait();
  }
  {
    std::lock_guard l(s.core->gate_mu);
    s.core->gate_open = false;
  }
  for (auto& session : s.core->connections.Live()) session->PostClose();
  for (auto& io : s.core->io_threads) {  // its timer would keep the thread running a while
    IoThread* t = io.get();
    net::post(t->ioc, [t] { t->deadlines.Stop(); });
  }
  for (auto& guard : s.work) guard.reset();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  // What it still finishes is posted to stopped I/O threads and dropped.
  s.service->StopInflating();
  s.accept_pacer.reset();
  s.acceptor.reset();
  s.accepting.reset();
}

}  // namespace ortserve
