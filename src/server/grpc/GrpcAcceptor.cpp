#include "server/grpc/GrpcAcceptor.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <grpcpp/server_posix.h>

#include <spdlog/spdlog.h>

#include "core/ThreadName.h"
#include "server/common/AcceptPacer.h"
#include "server/grpc/HandedOverConnections.h"

namespace ortserve::grpcfe {

namespace net = boost::asio;
using tcp = net::ip::tcp;

class GrpcAcceptor::Impl {
 public:
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::optional<common::AcceptPacer> pacer;
  std::thread thread;
  grpc::Server* server = nullptr;
  HandedOverConnections connections;
  size_t max_connections = 0;
  std::atomic<uint64_t> rejected{0};
  uint16_t port = 0;
  bool stopped = false;

  // The acceptor's thread only.
  void AcceptNext() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) Serve(std::move(socket));
      pacer->Next(ec, [this] {
        if (acceptor.is_open()) AcceptNext();
      });
    });
  }

  // A connection over max_connections is closed at once, unanswered, as the
  // HTTPS and metrics ports do: an answer would need the HTTP/2 (or TLS) work
  // that the limit is there to save. The count is checked only at the
  // limit, where it costs one fstat per connection held.
  void Serve(tcp::socket socket) {
    if (connections.Remembered() >= max_connections && connections.Open() >= max_connections) {
      const uint64_t n = rejected.fetch_add(1, std::memory_order_relaxed) + 1;
      if (n == 1 || n % 1000 == 0) {
        spdlog::warn("grpc: {} open connections, the limit (--grpc-max-connections); {} connection(s) closed "
                     "unanswered so far",
                     max_connections, n);
      }
      return;  // the socket closes as it goes
    }
    HandOver(std::move(socket));
  }

  // gRPC takes the descriptor (non-blocking, as its own acceptor's are) and
  // serves it as any connection it accepted, with the server's channel
  // arguments and resource quota.
  void HandOver(tcp::socket socket) {
    boost::system::error_code ignored;
    socket.non_blocking(true, ignored);
    socket.set_option(tcp::no_delay(true), ignored);
    const int fd = socket.release(ignored);
    connections.Add(fd);  // before gRPC may close it
    grpc::AddInsecureChannelFromFd(server, fd);
  }
};

Result<std::unique_ptr<GrpcAcceptor>> GrpcAcceptor::Listen(const std::string& address, uint16_t port,
                                                           size_t max_connections) {
  auto impl = std::make_unique<Impl>();
  impl->max_connections = max_connections;
  const std::string where = address + ":" + std::to_string(port);
  boost::system::error_code ec;
  const tcp::endpoint endpoint(net::ip::make_address(address, ec), port);
  if (!ec) impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Unavailable("gRPC server could not listen on " + where + ": " + ec.message());
  impl->port = impl->acceptor.local_endpoint(ec).port();
  impl->pacer.emplace(impl->acceptor.get_executor(), "grpc");
  return std::unique_ptr<GrpcAcceptor>(new GrpcAcceptor(std::move(impl)));
}

bool GrpcAcceptor::TakesAddress(const std::string& address) {
  boost::system::error_code ec;
  net::ip::make_address(address, ec);
  return !ec;
}

GrpcAcceptor::GrpcAcceptor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcAcceptor::~GrpcAcceptor() { Stop(); }

uint16_t GrpcAcceptor::port() const { return impl_->port; }
size_t GrpcAcceptor::OpenConnections() const { return impl_->connections.Open(); }
uint64_t GrpcAcceptor::RejectedConnections() const { return impl_->rejected.load(std::memory_order_relaxed); }

void GrpcAcceptor::Start(grpc::Server* server) {
  Impl& s = *impl_;
  s.server = server;
  s.AcceptNext();
  s.thread = std::thread([&s] {
    SetCurrentThreadName("grpc-accept");
    s.ioc.run();
  });
}

void GrpcAcceptor::Stop() {
  Impl& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  net::post(s.ioc, [&s] {
    boost::system::error_code ignored;
    s.pacer->Cancel();
    s.acceptor.close(ignored);
  });
  if (s.thread.joinable()) {
    s.thread.join();  // the loop ends with its last handler
  } else {
    s.ioc.run();  // never started: close the listener here
  }
}

}  // namespace ortserve::grpcfe
