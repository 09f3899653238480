#pragma once
// One HTTP/1.1 client connection. Internal to src/server/http.
//
// It lives on one I/O thread and handles one request at a time, in order
// (pipelining-safe): read (idle, then read timeout), hand the request to
// HttpService, and while a model has it watch for the client leaving (which
// cancels the request); the response comes back through the I/O thread's
// CompletionInbox and is written as one gather write.
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/http/HttpServer.h"
#include "server/http/HttpServerCore.h"
#include "server/http/HttpService.h"
#include "server/http/IoThread.h"
#include "server/http/JsonWriter.h"
#include "server/http/LingeringClose.h"
#include "server/http/RequestParser.h"
#include "server/http/ResponseHead.h"
#include "server/http/SessionBase.h"
#include "server/tracing/RequestTracer.h"

namespace ortserve::http {

// The short names the session's code uses (this header is included by the
// server's implementation only).
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

inline std::string ToString(beast::string_view s) { return std::string(s.data(), s.size()); }

// One connection. Templated over the stream so that plain HTTP pays nothing
// for TLS: Stream is Socket or beast::ssl_stream<Socket>.
template <class Stream>
class HttpSession final : public SessionBase, public std::enable_shared_from_this<HttpSession<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  template <class... StreamArgs>
  HttpSession(std::shared_ptr<HttpServerCore> core, std::shared_ptr<HttpService> service,
              const HttpServerOptions& options, IoThread* io_thread, StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...),
        io_thread_(io_thread),
        core_(std::move(core)),
        service_(std::move(service)),
        options_(options) {
    core_->connections.Opened();
    io_thread_->connections.fetch_add(1, std::memory_order_relaxed);
  }

  ~HttpSession() override {
    io_thread_->connections.fetch_sub(1, std::memory_order_relaxed);
    core_->connections.Closed(this);
  }

  void Start() {
    core_->connections.Register(this, std::weak_ptr<SessionBase>(this->weak_from_this()));
    beast::error_code ec;
    Tcp().set_option(tcp::no_delay(true), ec);
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      self->io_thread_->deadlines.Watch(self->weak_from_this());
      if constexpr (kTls) {
        self->DoHandshake();
      } else {
        self->DoRead();
      }
    });
  }

  void PostClose() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->DoClose(); });
  }

  void ArmCloseMonitor(uint64_t request) override {
    if (request == requests_ && awaiting_reply_ && !closed_) StartCloseMonitor();
  }

  bool CheckDeadline(std::chrono::steady_clock::time_point now) override {
    if (!closed_ && now >= deadline_) {
      spdlog::debug("http: closing a connection past its idle, read or write timeout");
      DoClose();  // its pending read or write completes with an error, which closes quietly
    }
    return !closed_;
  }

  bool Closed() const override { return closed_; }

 private:
  Socket& Tcp() { return beast::get_lowest_layer(stream_); }

  // The quota client id: the --client-id-header value, else the peer's IP.
  template <class Request>
  std::string ClientIdOf(const Request& req) {
    const std::string& header = options_.quotas.client_id_header;
    if (!header.empty()) {
      if (auto it = req.find(header); it != req.end() && !it->value().empty()) return ToString(it->value());
    }
    beast::error_code ec;
    auto peer = Tcp().remote_endpoint(ec);
    return ec ? std::string() : peer.address().to_string();
  }

  // The connection's deadline (ConnectionDeadlines closes it once passed);
  // Beast's own per-operation timeouts stay unset.
  void SetDeadline(std::chrono::seconds timeout) { deadline_ = std::chrono::steady_clock::now() + timeout; }
  void ClearDeadline() { deadline_ = std::chrono::steady_clock::time_point::max(); }

  void DoHandshake() {
    SetDeadline(options_.idle_timeout);
    stream_.async_handshake(net::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) {
        // Plain HTTP to the TLS port, no or a rejected client certificate, ...
        spdlog::debug("http: TLS handshake failed: {}", ec.message());
        return self->DoClose();
      }
      self->DoRead();
    });
  }

  // Waits up to the idle timeout for the next request to begin; from its
  // first byte the whole request has the read timeout.
  void DoRead() {
    if (closed_) return;
    if (buffer_.size() > 0) return ReadHeader();  // pipelined bytes: it has begun
    // Room for a whole small request (headers included) in one read; a
    // buffer grown by a large body is not kept for an idle connection.
    if (buffer_.capacity() > kReadBytes) buffer_.shrink_to_fit();
    buffer_.reserve(kFirstReadBytes);
    SetDeadline(options_.idle_timeout);
    stream_.async_read_some(buffer_.prepare(beast::read_size(buffer_, kReadBytes)),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->DoClose();  // idle timeout, EOF, reset: nothing to answer
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    request_.emplace(RequestLimits{.max_header_bytes = options_.max_header_bytes,
                                         .max_body_bytes = options_.max_input_size,
                                         .max_body_chunks = options_.max_body_chunks});
    SetDeadline(options_.read_timeout);
    // Usually the whole request came with its first read: parse it here
    // rather than through asynchronous reads that would each complete
    // through the I/O queue without reading anything.
    if (beast::error_code ec = request_->ParseBuffered(buffer_)) return OnReadError(ec);
    auto& parser = request_->beast();
    if (parser.is_done()) return OnRead({});
    if (parser.is_header_done()) return OnHeader({});
    bhttp::async_read_header(stream_, buffer_, parser,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& req = request_->beast().get();
    auto expect = req[bhttp::field::expect];
    if (beast::iequals(expect, "100-continue") && !request_->beast().is_done()) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = this->shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->DoClose();
                         self->DoReadBody();
                       });
      return;
    }
    DoReadBody();
  }

  void DoReadBody() {
    // Beast reads as much as the buffer's spare capacity holds (512 bytes at
    // least): without room a large body arrives in hundreds of small reads.
    const size_t remaining = request_->beast().content_length_remaining().value_or(kReadBytes);
    buffer_.reserve(buffer_.size() + std::min(remaining, kReadBytes));
    bhttp::async_read(stream_, buffer_, request_->beast(),
                      [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnReadError(beast::error_code ec) {
    // No answer (end of stream, reset, aborted) or a read timeout, after
    // which the stream has closed the socket already: just close.
    if (auto answer = request_->AnswerFor(ec)) return SendError(answer->status, std::move(answer->message));
    DoClose();
  }

  void OnRead(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    ClearDeadline();
    auto req = request_->beast().release();
    request_.reset();
    keep_alive_ = req.keep_alive();

    HttpRequest hreq;
    hreq.method = ToString(req.method_string());
    hreq.target = ToString(req.target());
    *hreq.body = std::move(req.body());
    if (auto it = req.find(bhttp::field::content_encoding); it != req.end()) hreq.content_encoding = ToString(it->value());
    if (auto it = req.find(bhttp::field::accept_encoding); it != req.end()) hreq.accept_encoding = ToString(it->value());
    if (auto it = req.find("Inference-Header-Content-Length"); it != req.end())
      hreq.inference_header_length = ToString(it->value());
    for (const std::string& name : core_->auth_headers)
      if (auto it = req.find(name); it != req.end()) hreq.auth_headers.emplace_back(name, ToString(it->value()));
    if (options_.quotas.quotas) hreq.client_id = ClientIdOf(req);
    if (options_.tracer) {
      for (auto [it, end] = req.equal_range("traceparent"); it != end; ++it) {
        AddTraceparentValue(&hreq.traceparent, std::string_view(it->value().data(), it->value().size()));
      }
    }

    cancel_ = std::make_shared<CancelToken>();
    awaiting_reply_ = true;
    ++requests_;
    self_ = this->shared_from_this();
    RequestContext ctx;
    ctx.cancelled = cancel_;
    std::weak_ptr<HttpSession> weak = this->weak_from_this();
    ctx.post = [core = core_, weak](std::function<void()> fn) {
      std::lock_guard l(core->gate_mu);
      if (!core->gate_open) return;
      if (auto s = weak.lock()) {
        IoThread* io = s->io_thread_;
        io->completions.Push(std::move(s), std::move(fn));
      }
    };
    ctx.reply = [weak](HttpResponse r) {
      if (auto s = weak.lock()) s->OnResponse(std::move(r));
    };
    spdlog::trace("http: {} {}", hreq.method, std::string_view(hreq.target).substr(0, 256));
    service_->Handle(std::move(hreq), std::move(ctx));
    // Still waiting (the model has the request): watch for the client leaving.
    if (awaiting_reply_ && !closed_) io_thread_->close_monitors.Add(this->weak_from_this(), requests_);
  }

  // While a request is inside a model nothing reads the socket; a readable
  // socket then means either a pipelined request (left for the next read) or
  // the client closing (cancel the request). The watch is a one-byte
  // MSG_PEEK receive, not async_wait: asio re-arms the descriptor with an
  // epoll_ctl for every wait (a syscall per request), while a receive is
  // tried once and then waits on the registration the socket already has.
  void StartCloseMonitor() {
    if (monitoring_) return;
    monitoring_ = true;
    Tcp().async_receive(net::buffer(&peek_byte_, 1), tcp::socket::message_peek,
                        [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                          self->OnMonitor(ec, n);
                        });
  }

  void OnMonitor(beast::error_code ec, size_t n) {
    monitoring_ = false;
    if (ec == net::error::operation_aborted || closed_ || !awaiting_reply_) return;
    if (!ec && n > 0) {
      // Plain HTTP: pipelined bytes, left for the next read. TLS: they may
      // be the client's close_notify, which TLS 1.3 encrypts like data, so
      // only reading them through TLS tells (see OnReadAhead).
      if constexpr (kTls) StartReadAhead();
      return;
    }
    ClientLeft();  // end of stream or a broken connection
  }

  void ClientLeft() {
    spdlog::debug("http: client closed the connection with a request in flight; cancelling it");
    DoClose();
  }

  // TLS only: reads what arrived while the request is in flight into the
  // read buffer (the next request's parse starts from it).
  void StartReadAhead() {
    reading_ahead_ = true;
    ClearDeadline();  // a long inference is not an idle client; DoWrite sets it again
    stream_.async_read_some(buffer_.prepare(kReadAheadBytes),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->OnReadAhead(ec, n);
                            });
  }

  void OnReadAhead(beast::error_code ec, size_t n) {
    reading_ahead_ = false;
    if (!ec) buffer_.commit(n);
    if (closed_) return;
    if (deferred_response_) {  // the answer came meanwhile (and cancelled this read)
      HttpResponse r = std::move(*deferred_response_);
      deferred_response_.reset();
      if (ec && ec != net::error::operation_aborted) return DoClose();
      return DoWrite(std::move(r));
    }
    if (!awaiting_reply_) return;
    // close_notify, EOF or a broken connection: the client is gone.
    if (ec) return ClientLeft();
    // Data (a pipelined request): keep watching until the answer is ready,
    // unless the buffer is already full of it.
    if (buffer_.size() < options_.max_header_bytes) StartCloseMonitor();
  }

  void OnResponse(HttpResponse r) {
    if (closed_ || !awaiting_reply_) return;
    awaiting_reply_ = false;
    if (monitoring_ || reading_ahead_) {
      beast::error_code ec;
      Tcp().cancel(ec);
    }
    if (r.close) keep_alive_ = false;
    if (reading_ahead_) {
      // One TLS operation per direction at a time is fine, but the write
      // waits for the cancelled read so that the buffer is not read into
      // while the next request is parsed from it.
      deferred_response_ = std::move(r);
    } else {
      DoWrite(std::move(r));
    }
    self_.reset();  // the write (or read-ahead) handler holds the session now
  }

  // An answer to a request that was not (completely) read: the connection
  // closes after it, lingering (LingeringClose.h).
  void SendError(unsigned status, std::string message) {
    keep_alive_ = false;
    awaiting_reply_ = false;
    linger_after_write_ = true;
    HttpResponse r;
    r.status = status;
    r.body = ErrorJson(message);
    r.close = true;
    DoWrite(std::move(r));
  }

  // Head, body and binary output tensors go out as one gather write: the
  // tensors are not copied.
  void DoWrite(HttpResponse r) {
    const HttpResponse& res = response_.emplace(std::move(r));
    response_head_.clear();
    AppendResponseHead(&response_head_, res, keep_alive_);
    response_buffers_.clear();
    response_buffers_.emplace_back(response_head_.data(), response_head_.size());
    if (!res.body.empty()) response_buffers_.emplace_back(res.body.data(), res.body.size());
    for (const TensorData& t : res.tail)
      if (t.size()) response_buffers_.emplace_back(t.data(), t.size());
    SetDeadline(options_.idle_timeout);  // for the write, then the next request
    net::async_write(stream_, response_buffers_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
      self->OnWrite(ec);
    });
  }

  void OnWrite(beast::error_code ec) {
    const std::chrono::microseconds pause = response_->pause_reading;
    response_.reset();  // releases the body and the tensors; head and buffer list keep their capacity
    if (!ec && linger_after_write_) return StartLinger();
    if (ec || !keep_alive_) return DoClose();
    if (pause.count() > 0) return PauseReading(pause);
    DoRead();
  }

  // The next request is read once `pause` has passed (a quota refusal,
  // HttpResponse::pause_reading); nothing is read meanwhile, the idle
  // deadline set for the write keeps running, and closing ends the wait.
  void PauseReading(std::chrono::microseconds pause) {
    if (!pause_timer_) pause_timer_.emplace(stream_.get_executor());
    pause_timer_->expires_after(pause);
    pause_timer_->async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec) self->DoRead();
    });
  }

  // Lingering close: FIN, then read and drop what the client still sends
  // until it closes, or LingeringClose's bounds (time through the deadline).
  void StartLinger() {
    beast::error_code ec;
    Tcp().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return DoClose();
    lingered_bytes_ = buffer_.size();  // read but never parsed
    buffer_.clear();
    deadline_ = std::chrono::steady_clock::now() + LingeringClose::kMaxDrainTime;
    Linger();
  }

  void Linger() {
    if (closed_) return;
    if (lingered_bytes_ >= LingeringClose::kMaxDrainBytes) {
      spdlog::debug("http: lingering close: cut off a client still sending after {} bytes (the size bound)",
                    lingered_bytes_);
      return DoClose();
    }
    // Below TLS, if any: these bytes are dropped unread.
    Tcp().async_read_some(buffer_.prepare(kReadBytes), [self = this->shared_from_this()](beast::error_code ec,
                                                                                       size_t n) {
      self->lingered_bytes_ += n;
      if (ec) return self->DoClose();  // the client closed (or the deadline closed the socket)
      self->Linger();
    });
  }

  void DoClose() {
    if (closed_) return;
    closed_ = true;
    if (awaiting_reply_ && cancel_) cancel_->Cancel();
    if (pause_timer_) pause_timer_->cancel();
    beast::error_code ec;
    Tcp().shutdown(tcp::socket::shutdown_send, ec);
    Tcp().close(ec);
    self_.reset();
  }

  Stream stream_;
  IoThread* io_thread_;  // the one this connection lives on
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  beast::flat_buffer buffer_;
  static constexpr size_t kReadBytes = 65536;       // most read into buffer_ at once
  static constexpr size_t kFirstReadBytes = 16384;  // a request's first read
  // TLS read-ahead while a request is in flight (StartReadAhead).
  static constexpr size_t kReadAheadBytes = 4096;
  bool reading_ahead_ = false;
  bool linger_after_write_ = false;  // the answer being written is an early error (SendError)
  size_t lingered_bytes_ = 0;        // dropped since (StartLinger)
  char peek_byte_ = 0;  // the close monitor's receive target (MSG_PEEK: never consumed)
  std::optional<HttpResponse> deferred_response_;
  std::optional<net::steady_timer> pause_timer_;  // PauseReading's, made on first use
  std::optional<RequestParser> request_;  // the request being read
  // The response being written (DoWrite to OnWrite).
  std::optional<HttpResponse> response_;
  std::string response_head_;
  std::vector<net::const_buffer> response_buffers_;
  std::shared_ptr<HttpServerCore> core_;
  std::shared_ptr<HttpService> service_;
  const HttpServerOptions& options_;
  CancelFlag cancel_;
  std::shared_ptr<HttpSession> self_;  // alive while a model holds our request
  bool keep_alive_ = true;
  bool awaiting_reply_ = false;
  uint64_t requests_ = 0;  // requests read on this connection
  bool monitoring_ = false;
  bool closed_ = false;
};

}  // namespace ortserve::http
