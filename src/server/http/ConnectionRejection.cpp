#include "server/http/ConnectionRejection.h"

#include <boost/asio/write.hpp>

namespace ortserve::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using boost::system::error_code;

ConnectionRejection::ConnectionRejection(std::shared_ptr<HttpServerCore> core, Socket socket,
                                         std::shared_ptr<const std::string> response)
    : core_(std::move(core)), socket_(std::move(socket)), timer_(socket_.get_executor()),
      response_(std::move(response)) {
  core_->rejections_lingering.fetch_add(1, std::memory_order_relaxed);
}

ConnectionRejection::~ConnectionRejection() {
  core_->rejections_lingering.fetch_sub(1, std::memory_order_relaxed);
}

void ConnectionRejection::Start() {
  net::async_write(socket_, net::buffer(*response_), [self = shared_from_this()](error_code ec, size_t) {
    if (ec) return self->Close();
    self->socket_.shutdown(tcp::socket::shutdown_send, ec);
    self->timer_.expires_after(LingeringClose::kMaxDrainTime);
    self->timer_.async_wait([self](error_code) { self->Close(); });
    self->Drain();
  });
}

void ConnectionRejection::Drain() {
  socket_.async_read_some(net::buffer(sink_), [self = shared_from_this()](error_code ec, size_t n) {
    self->drained_ += n;
    if (ec || self->drained_ > LingeringClose::kMaxDrainBytes) return self->Close();
    self->Drain();
  });
}

void ConnectionRejection::Close() {
  error_code ec;
  timer_.cancel();
  socket_.close(ec);
}

}  // namespace ortserve::http
