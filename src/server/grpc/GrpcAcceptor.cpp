#include "server/grpc/GrpcAcceptor.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <grpcpp/server_posix.h>

#include "core/ThreadName.h"
#include "server/common/AcceptPacer.h"

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
  uint16_t port = 0;
  bool stopped = false;

  // The acceptor's thread only.
  void AcceptNext() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) HandOver(std::move(socket));
      pacer->Next(ec, [this] {
        if (acceptor.is_open()) AcceptNext();
      });
    });
  }

  // gRPC takes the descriptor (non-blocking, as its own acceptor's are) and
  // serves it as any connection it accepted, with the server's channel
  // arguments and resource quota.
  void HandOver(tcp::socket socket) {
    boost::system::error_code ignored;
    socket.non_blocking(true, ignored);
    socket.set_option(tcp::no_delay(true), ignored);
    grpc::AddInsecureChannelFromFd(server, socket.release(ignored));
  }
};

Result<std::unique_ptr<GrpcAcceptor>> GrpcAcceptor::Listen(const std::string& address, uint16_t port) {
  auto impl = std::make_unique<Impl>();
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
