#include "server/grpc/GrpcAcceptor.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

#include "core/ThreadName.h"
#include "server/common/AcceptPacer.h"

namespace ortserve::grpcfe {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// A connection accepted and waiting for its client's first bytes.
struct Waiting {
  explicit Waiting(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
  tcp::socket socket;
  net::steady_timer timer;
};

struct Listener {
  Listener(net::io_context& ioc, const std::string& name) : acceptor(ioc), pacer(acceptor.get_executor(), name) {}
  tcp::acceptor acceptor;
  common::AcceptPacer pacer;
};

// The addresses to listen on: `address` itself when it is an IP address,
// else what it resolves to, in the resolver's order, each once.
Result<std::vector<net::ip::address>> Addresses(net::io_context& ioc, std::string address) {
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  boost::system::error_code ec;
  const net::ip::address ip = net::ip::make_address(address, ec);
  if (!ec) return std::vector<net::ip::address>{ip};
  tcp::resolver resolver(ioc);
  const auto results = resolver.resolve(address, "", tcp::resolver::passive, ec);
  if (ec) return Unavailable("gRPC address '" + address + "' does not resolve: " + ec.message());
  std::vector<net::ip::address> out;
  for (const auto& entry : results) {
    const net::ip::address resolved = entry.endpoint().address();
    if (std::find(out.begin(), out.end(), resolved) == out.end()) out.push_back(resolved);
  }
  if (out.empty()) return Unavailable("gRPC address '" + address + "' resolves to no address");
  return out;
}

std::string Endpoint(const net::ip::address& address, uint16_t port) {
  return (address.is_v6() ? "[" + address.to_string() + "]" : address.to_string()) + ":" + std::to_string(port);
}

}  // namespace

class GrpcAcceptor::Impl {
 public:
  net::io_context ioc;
  std::vector<std::unique_ptr<Listener>> listeners;
  std::thread thread;
  grpc::Server* server = nullptr;
  ConnectionLimit* limit = nullptr;
  // Connections waiting for their first bytes (the acceptor's thread only).
  std::unordered_set<std::shared_ptr<Waiting>> waiting;
  uint16_t port = 0;
  bool stopped = false;

  // Binds and listens on address:port; the error's message when it cannot.
  std::string Bind(const net::ip::address& address, uint16_t at) {
    auto listener = std::make_unique<Listener>(ioc, "grpc");
    tcp::acceptor& acceptor = listener->acceptor;
    const tcp::endpoint endpoint(address, at);
    boost::system::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
    if (!ec) port = acceptor.local_endpoint(ec).port();
    if (ec) return ec.message();
    listeners.push_back(std::move(listener));
    return {};
  }

  // The acceptor's thread only.
  void AcceptNext(Listener& listener) {
    listener.acceptor.async_accept([this, &listener](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !listener.acceptor.is_open()) return;
      if (!ec) Serve(std::move(socket));
      listener.pacer.Next(ec, [this, &listener] {
        if (listener.acceptor.is_open()) AcceptNext(listener);
      });
    });
  }

  // A connection over the limit is closed at once, unanswered, as the
  // HTTPS and metrics ports do: an answer would need the HTTP/2 (or TLS) work
  // that the limit is there to save.
  void Serve(tcp::socket socket) {
    if (limit->Full(waiting.size())) {
      limit->Refuse();
      return;  // the socket closes as it goes
    }
    AwaitFirstBytes(std::move(socket));
  }

  // A gRPC client sends its HTTP/2 preface as soon as it connects. gRPC
  // applies no handshake deadline to a descriptor handed over (its own
  // acceptor's is 120 s unless told), so a connection that sends nothing
  // within kHandshakeTimeout is closed here, never handed over: silent
  // connections cannot hold the limit's slots for good.
  void AwaitFirstBytes(tcp::socket socket) {
    auto entry = std::make_shared<Waiting>(std::move(socket));
    waiting.insert(entry);
    entry->timer.expires_after(kHandshakeTimeout);
    entry->timer.async_wait([entry](const boost::system::error_code& ec) {
      boost::system::error_code ignored;
      if (!ec) entry->socket.cancel(ignored);  // the wait below ends operation_aborted
    });
    entry->socket.async_wait(tcp::socket::wait_read, [this, entry](const boost::system::error_code& ec) {
      entry->timer.cancel();
      waiting.erase(entry);
      if (!ec) HandOver(std::move(entry->socket));
      // else: silent too long, or Stop(): the socket closes with entry
    });
  }

  // gRPC takes the descriptor (non-blocking, as its own acceptor's are) and
  // serves it as any connection it accepted, with the server's channel
  // arguments and resource quota.
  void HandOver(tcp::socket socket) {
    boost::system::error_code ec;
    const tcp::endpoint peer = socket.remote_endpoint(ec);
    if (ec) return;  // the client is gone already
    socket.non_blocking(true, ec);
    socket.set_option(tcp::no_delay(true), ec);
    const int fd = socket.release(ec);
    limit->connections().Add(fd, peer.address().to_string());  // before gRPC may close it
    grpc::AddInsecureChannelFromFd(server, fd);
  }
};

Result<std::unique_ptr<GrpcAcceptor>> GrpcAcceptor::Listen(const std::string& address, uint16_t port,
                                                           ConnectionLimit* limit) {
  auto impl = std::make_unique<Impl>();
  impl->limit = limit;
  auto addresses = Addresses(impl->ioc, address);
  if (!addresses.ok()) return addresses.status();
  std::vector<std::string> failures;
  for (const net::ip::address& ip : *addresses) {
    // Port 0: the first address's free port, for every address.
    const uint16_t at = impl->listeners.empty() ? port : impl->port;
    if (std::string error = impl->Bind(ip, at); !error.empty()) failures.push_back(Endpoint(ip, at) + ": " + error);
  }
  if (impl->listeners.empty()) {
    return Unavailable("gRPC server could not listen on " + address + ":" + std::to_string(port) + " (" +
                       failures.front() + ")");
  }
  for (const std::string& failure : failures) {
    spdlog::warn("gRPC server: not listening on {} ({} resolves to it)", failure, address);
  }
  return std::unique_ptr<GrpcAcceptor>(new GrpcAcceptor(std::move(impl)));
}

GrpcAcceptor::GrpcAcceptor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcAcceptor::~GrpcAcceptor() { Stop(); }

uint16_t GrpcAcceptor::port() const { return impl_->port; }

void GrpcAcceptor::Start(grpc::Server* server) {
  Impl& s = *impl_;
  s.server = server;
  for (auto& listener : s.listeners) s.AcceptNext(*listener);
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
    for (auto& listener : s.listeners) {
      listener->pacer.Cancel();
      listener->acceptor.close(ignored);
    }
    for (const auto& entry : s.waiting) {
      entry->timer.cancel();
      entry->socket.cancel(ignored);
    }
  });
  if (s.thread.joinable()) {
    s.thread.join();  // the loop ends with its last handler
  } else {
    s.ioc.run();  // never started: close the listeners here
  }
}

}  // namespace ortserve::grpcfe
