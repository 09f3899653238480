#include "server/http/HttpServer.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/asio/ssl.hpp>
#include <openssl/ssl.h>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <unordered_map>
#include <vector>

#include "core/ThreadName.h"
#include "repository/ModelRepository.h"
#include "server/http/HttpService.h"
#include "server/http/HttpStatus.h"
#include "server/http/JsonWriter.h"
#include "server/http/RequestParser.h"

namespace ortserve {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::string ToString(beast::string_view s) { return std::string(s.data(), s.size()); }

// The status line and headers of a response, written here rather than by
// Beast's serializer: the header set is small and fixed, and the serializer's
// buffer-sequence machinery was a visible part of the CPU a small request
// costs. Appended to `out` (a buffer reused across a connection's responses);
// `extra_headers` are whole "Name: value\r\n" lines.
void AppendResponseHead(std::string* out, const http::HttpResponse& r, bool keep_alive,
                        std::string_view extra_headers = {}) {
  const auto add = [out](std::string_view name, std::string_view value) {
    out->append(name).append(": ").append(value).append("\r\n");
  };
  out->append("HTTP/1.1 ").append(std::to_string(r.status)).append(" ").append(http::HttpReason(r.status));
  out->append("\r\n");
  if (!r.content_type.empty()) add("Content-Type", r.content_type);
  if (r.inference_header_length) add("Inference-Header-Content-Length", std::to_string(*r.inference_header_length));
  if (!r.content_encoding.empty()) add("Content-Encoding", r.content_encoding);
  add("Content-Length", std::to_string(r.size()));
  if (!keep_alive) add("Connection", "close");
  out->append(extra_headers).append("\r\n");
}

// What the server needs of a session of either stream type.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Any thread.
  virtual void PostClose() = 0;
  // The connection's I/O thread: if its request number `request` is still
  // inside a model, watch for the client leaving.
  virtual void ArmCloseMonitor(uint64_t request) = 0;
  // The connection's I/O thread: closes the connection if its deadline (idle,
  // read or write timeout) is at or before `now`. False once it is closed.
  virtual bool CheckDeadline(std::chrono::steady_clock::time_point now) = 0;
  // The connection's I/O thread.
  virtual bool Closed() const = 0;
};

// Arms the close monitors of requests still inside a model when the I/O
// thread runs out of work, or after a short delay while it stays busy.
// Arming a monitor costs a system call that finds nothing (asio tries every
// receive before it waits for readiness). When the thread is about to wait
// for events that is cheap, and the last chance to arm without a wake-up.
// While the thread stays busy (many small requests), a sweep every kDelay
// arms those in flight since before the previous sweep (one to two kDelay
// old): a small model's requests are answered before that and never pay for
// a monitor. A client that leaves is noticed that much later, which matters
// only for requests that run longer than that. No timer: RunIoThread calls
// it between handlers.
class DeferredCloseMonitors {
 public:
  static constexpr std::chrono::milliseconds kDelay{1};

  // All: the io_context's thread only.
  bool Pending() const { return !arriving_.empty() || !waiting_.empty(); }

  void Add(std::weak_ptr<SessionBase> session, uint64_t request) {
    if (!Pending()) next_sweep_ = std::chrono::steady_clock::now() + kDelay;
    arriving_.push_back({std::move(session), request});
  }

  // Between two handlers while the thread is busy.
  void SweepIfDue() {
    if (++handlers_ % kHandlersPerClockRead != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_sweep_) return;
    ArmEntries(waiting_);
    waiting_.swap(arriving_);
    next_sweep_ = now + kDelay;
  }

  // When the thread has no ready handler left.
  void ArmAll() {
    ArmEntries(waiting_);
    ArmEntries(arriving_);
  }

 private:
  static constexpr uint32_t kHandlersPerClockRead = 8;

  struct Entry {
    std::weak_ptr<SessionBase> session;
    uint64_t request;  // the connection's request number (a later one may be in flight by the sweep)
  };

  static void ArmEntries(std::vector<Entry>& entries) {
    for (const Entry& e : entries)
      if (auto session = e.session.lock()) session->ArmCloseMonitor(e.request);
    entries.clear();  // keeps its capacity
  }

  std::vector<Entry> arriving_;  // since the last sweep
  std::vector<Entry> waiting_;   // armed by the next sweep
  std::chrono::steady_clock::time_point next_sweep_;
  uint32_t handlers_ = 0;
};

// Closes an I/O thread's connections whose deadline (idle, read or write
// timeout) has passed, checked by one timer every kTick, instead of Beast's
// per-operation timeouts: those arm and cancel a timer with every read and
// write and run a handler for each cancel, about 1 us of the ~20 a small
// request costs. A timeout therefore fires up to kTick late.
class ConnectionDeadlines {
 public:
  static constexpr std::chrono::milliseconds kTick{100};

  explicit ConnectionDeadlines(net::io_context& ioc) : timer_(ioc) {}

  // The io_context's thread only. The connection is checked until it closes.
  void Watch(std::weak_ptr<SessionBase> session) {
    if (stopped_) return;
    sessions_.push_back(std::move(session));
    if (!armed_) Arm();
  }

  // The io_context's thread only: no more checks (the server is stopping).
  void Stop() {
    stopped_ = true;
    timer_.cancel();
  }

 private:
  void Arm() {
    armed_ = true;
    timer_.expires_after(kTick);
    timer_.async_wait([this](beast::error_code ec) { Sweep(ec); });
  }

  void Sweep(beast::error_code ec) {
    armed_ = false;
    if (ec) return;
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < sessions_.size();) {
      if (auto session = sessions_[i].lock(); session && session->CheckDeadline(now)) {
        ++i;
      } else {  // closed or gone: unordered removal
        sessions_[i] = std::move(sessions_.back());
        sessions_.pop_back();
      }
    }
    if (!sessions_.empty()) Arm();
  }

  net::steady_timer timer_;
  bool armed_ = false;
  bool stopped_ = false;
  std::vector<std::weak_ptr<SessionBase>> sessions_;
};

// Completions handed to one I/O thread by other threads (model workers, the
// repository's loader). A push onto an empty inbox posts one drain handler,
// which runs everything pushed by then in arrival order: a batch of N
// completions costs the I/O thread one asio handler instead of N, and the
// pushing thread takes no lock the I/O thread needs (asio's post locks the
// io_context's queue, which the I/O thread locks for every handler it runs;
// under a small model's load it was found blocked there ~2% of its time).
// The inbox is a lock-free stack (push: compare-and-swap of the head; drain:
// take the whole list and reverse it), so no pop-one ABA problem arises.
class CompletionInbox {
 public:
  explicit CompletionInbox(net::io_context& ioc) : ioc_(ioc) {}
  CompletionInbox(const CompletionInbox&) = delete;
  CompletionInbox& operator=(const CompletionInbox&) = delete;

  // Completions never run (the server stopped first) are destroyed unrun.
  ~CompletionInbox() { Free(head_.exchange(nullptr)); }

  // Any thread. `fn` runs on the I/O thread unless `session` is closed by then.
  void Push(std::shared_ptr<SessionBase> session, std::function<void()> fn) {
    auto* node = new Node{std::move(session), std::move(fn), nullptr};
    Node* head = head_.load(std::memory_order_relaxed);
    do {
      node->next = head;
    } while (!head_.compare_exchange_weak(head, node, std::memory_order_release, std::memory_order_relaxed));
    if (head == nullptr) net::post(ioc_, [this] { Drain(); });
  }

 private:
  struct Node {
    std::shared_ptr<SessionBase> session;
    std::function<void()> fn;
    Node* next;
  };

  // The io_context's thread. What is pushed meanwhile posts the next drain.
  void Drain() {
    Node* fifo = nullptr;
    for (Node* n = head_.exchange(nullptr, std::memory_order_acquire); n != nullptr;) {
      Node* next = n->next;
      n->next = fifo;
      fifo = n;
      n = next;
    }
    while (fifo != nullptr) {
      std::unique_ptr<Node> node(fifo);
      fifo = fifo->next;
      if (!node->session->Closed()) node->fn();
    }
  }

  static void Free(Node* n) {
    while (n != nullptr) delete std::exchange(n, n->next);
  }

  net::io_context& ioc_;
  std::atomic<Node*> head_{nullptr};
};

// An I/O thread's io_context and the per-thread services of its connections.
// A connection stays on one I/O thread for its whole life, so its handlers
// run one at a time without a strand, and the thread that sees a socket event
// runs its handler itself: a single io_context run by several threads hands
// every event from the thread waiting in epoll to another one (a futex wake
// and a context switch per request).
struct IoThread {
  net::io_context ioc{/*concurrency_hint=*/1};  // first: destroyed after the services using it
  DeferredCloseMonitors close_monitors;
  ConnectionDeadlines deadlines{ioc};
  CompletionInbox completions{ioc};
};

// An I/O thread's loop: io_context::run, except that while close monitors
// are deferred it runs one handler at a time, so that it sees the moment it
// runs out of work (and arms them) and can sweep them on time while busy.
void RunIoThread(IoThread& io) {
  for (;;) {
    if (!io.close_monitors.Pending()) {
      if (io.ioc.run_one() == 0) return;  // stopped
    } else if (io.ioc.poll_one() > 0) {
      io.close_monitors.SweepIfDue();
    } else {
      io.close_monitors.ArmAll();  // about to wait for events
      if (io.ioc.stopped()) return;
    }
  }
}

// Shared by the server, its sessions and in-flight completion callbacks, so
// a completion that arrives after the server is gone finds a live (stopped)
// io_context and a closed gate rather than freed memory.
struct Core {
  std::vector<std::unique_ptr<IoThread>> io_threads;
  std::mutex gate_mu;
  bool gate_open = true;  // completions may still be posted
  std::mutex sessions_mu;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions;
  std::atomic<size_t> open_connections{0};  // live Session objects
  std::atomic<uint64_t> rejected_connections{0};  // over max_connections
  std::atomic<size_t> rejections_lingering{0};    // live Rejection objects
  // Headers the access policy checks; copied into each request (none: no policy).
  std::vector<std::string> auth_headers;
};

// A connection's socket, its executor the I/O thread's io_context by type.
// Beast's tcp_stream over the default any_io_executor copied and destroyed a
// type-erased executor in every read and write handler and added its own
// operation layer, for timeouts that ConnectionDeadlines does instead: about
// 0.4 us of the I/O thread's ~10 us per small request (tiny JSON, wrk -c32:
// +6.5% requests/s; bench/FINDINGS.md, stop 15).
using Socket = net::basic_stream_socket<tcp, net::io_context::executor_type>;
using TlsStream = beast::ssl_stream<Socket>;

// One connection. Templated over the stream so that plain HTTP pays nothing
// for TLS: Stream is Socket or beast::ssl_stream<Socket>.
template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  template <class... StreamArgs>
  Session(std::shared_ptr<Core> core, std::shared_ptr<http::HttpService> service, const HttpServerOptions& options,
          IoThread* io_thread, StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...),
        io_thread_(io_thread),
        core_(std::move(core)),
        service_(std::move(service)),
        options_(options) {
    core_->open_connections.fetch_add(1, std::memory_order_relaxed);
  }

  ~Session() override {
    core_->open_connections.fetch_sub(1, std::memory_order_relaxed);
    std::lock_guard l(core_->sessions_mu);
    core_->sessions.erase(this);
  }

  void Start() {
    {
      std::lock_guard l(core_->sessions_mu);
      core_->sessions.emplace(this, std::weak_ptr<SessionBase>(this->weak_from_this()));
    }
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
    request_.emplace(http::RequestLimits{.max_header_bytes = options_.max_header_bytes,
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

    http::HttpRequest hreq;
    hreq.method = ToString(req.method_string());
    hreq.target = ToString(req.target());
    *hreq.body = std::move(req.body());
    if (auto it = req.find(bhttp::field::content_encoding); it != req.end()) hreq.content_encoding = ToString(it->value());
    if (auto it = req.find(bhttp::field::accept_encoding); it != req.end()) hreq.accept_encoding = ToString(it->value());
    if (auto it = req.find("Inference-Header-Content-Length"); it != req.end())
      hreq.inference_header_length = ToString(it->value());
    for (const std::string& name : core_->auth_headers)
      if (auto it = req.find(name); it != req.end()) hreq.auth_headers.emplace_back(name, ToString(it->value()));
    if (options_.tracer) {
      for (auto [it, end] = req.equal_range("traceparent"); it != end; ++it) {
        AddTraceparentValue(&hreq.traceparent, std::string_view(it->value().data(), it->value().size()));
      }
    }

    cancel_ = std::make_shared<CancelToken>();
    awaiting_reply_ = true;
    ++requests_;
    self_ = this->shared_from_this();
    http::RequestContext ctx;
    ctx.cancelled = cancel_;
    std::weak_ptr<Session> weak = this->weak_from_this();
    ctx.post = [core = core_, weak](std::function<void()> fn) {
      std::lock_guard l(core->gate_mu);
      if (!core->gate_open) return;
      if (auto s = weak.lock()) {
        IoThread* io = s->io_thread_;
        io->completions.Push(std::move(s), std::move(fn));
      }
    };
    ctx.reply = [weak](http::HttpResponse r) {
      if (auto s = weak.lock()) s->OnResponse(std::move(r));
    };
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
      http::HttpResponse r = std::move(*deferred_response_);
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

  void OnResponse(http::HttpResponse r) {
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

  void SendError(unsigned status, std::string message) {
    keep_alive_ = false;
    awaiting_reply_ = false;
    http::HttpResponse r;
    r.status = status;
    r.body = http::ErrorJson(message);
    r.close = true;
    DoWrite(std::move(r));
  }

  // Head, body and binary output tensors go out as one gather write: the
  // tensors are not copied.
  void DoWrite(http::HttpResponse r) {
    const http::HttpResponse& res = response_.emplace(std::move(r));
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
    response_.reset();  // releases the body and the tensors; head and buffer list keep their capacity
    if (ec || !keep_alive_) return DoClose();
    DoRead();
  }

  void DoClose() {
    if (closed_) return;
    closed_ = true;
    if (awaiting_reply_ && cancel_) cancel_->Cancel();
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
  char peek_byte_ = 0;  // the close monitor's receive target (MSG_PEEK: never consumed)
  std::optional<http::HttpResponse> deferred_response_;
  std::optional<http::RequestParser> request_;  // the request being read
  // The response being written (DoWrite to OnWrite).
  std::optional<http::HttpResponse> response_;
  std::string response_head_;
  std::vector<net::const_buffer> response_buffers_;
  std::shared_ptr<Core> core_;
  std::shared_ptr<http::HttpService> service_;
  const HttpServerOptions& options_;
  CancelFlag cancel_;
  std::shared_ptr<Session> self_;  // alive while a model holds our request
  bool keep_alive_ = true;
  bool awaiting_reply_ = false;
  uint64_t requests_ = 0;  // requests read on this connection
  bool monitoring_ = false;
  bool closed_ = false;
};

// A plain-HTTP connection beyond max_connections. It is answered 503 at once,
// before its request is read (a server may answer before the request is
// complete), then whatever the client sends is read and dropped for a short
// while: closing a socket with unread data resets the connection, and the
// reset can destroy the answer before the client reads it.
class Rejection : public std::enable_shared_from_this<Rejection> {
 public:
  Rejection(std::shared_ptr<Core> core, Socket socket, std::shared_ptr<const std::string> response)
      : core_(std::move(core)), socket_(std::move(socket)), timer_(socket_.get_executor()),
        response_(std::move(response)) {
    core_->rejections_lingering.fetch_add(1, std::memory_order_relaxed);
  }
  ~Rejection() { core_->rejections_lingering.fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    net::async_write(socket_, net::buffer(*response_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      self->socket_.shutdown(tcp::socket::shutdown_send, ec);
      self->timer_.expires_after(kLinger);
      self->timer_.async_wait([self](beast::error_code) { self->Close(); });
      self->Drain();
    });
  }

  // At most this many Rejections linger at once; beyond, connections are
  // closed without an answer, so a flood costs no more than this.
  static constexpr size_t kMaxLingering = 256;

 private:
  static constexpr auto kLinger = std::chrono::seconds(1);
  static constexpr size_t kMaxDrainBytes = size_t{1} << 20;

  void Drain() {
    socket_.async_read_some(net::buffer(sink_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kMaxDrainBytes) return self->Close();
      self->Drain();
    });
  }

  void Close() {
    beast::error_code ec;
    timer_.cancel();
    socket_.close(ec);
  }

  std::shared_ptr<Core> core_;
  Socket socket_;
  net::steady_timer timer_;
  std::shared_ptr<const std::string> response_;
  std::array<char, 4096> sink_;
  size_t drained_ = 0;
};

// The server's TLS context: certificate chain and key, and with a root
// certificate, client certificates required and verified against it. Every
// error names the flag and the file.
Result<std::unique_ptr<net::ssl::context>> MakeTlsContext(const HttpServerOptions::Tls& tls) {
  auto cert = auth::ReadPemFile(tls.server_cert_file, auth::PemKind::kCertificate, "--http-server-cert");
  if (!cert.ok()) return cert.status();
  auto key = auth::ReadPemFile(tls.server_key_file, auth::PemKind::kPrivateKey, "--http-server-key");
  if (!key.ok()) return key.status();
  std::optional<std::string> root;
  if (!tls.root_cert_file.empty()) {
    auto pem = auth::ReadPemFile(tls.root_cert_file, auth::PemKind::kCertificate, "--http-root-cert");
    if (!pem.ok()) return pem.status();
    root = std::move(pem).value();
  }
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1 |
                   net::ssl::context::single_dh_use);
  beast::error_code ec;
  ctx->use_certificate_chain(net::buffer(*cert), ec);
  if (ec) return InvalidArgument("--http-server-cert file '" + tls.server_cert_file + "': " + ec.message());
  ctx->use_private_key(net::buffer(*key), net::ssl::context::pem, ec);
  if (ec || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return InvalidArgument("--http-server-key file '" + tls.server_key_file +
                           "' does not match the certificate in --http-server-cert file '" + tls.server_cert_file +
                           "'" + (ec ? ": " + ec.message() : std::string()));
  }
  if (root) {
    ctx->add_certificate_authority(net::buffer(*root), ec);
    if (ec) return InvalidArgument("--http-root-cert file '" + tls.root_cert_file + "': " + ec.message());
    ctx->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  ModelRepository* repository;
  std::shared_ptr<Core> core = std::make_shared<Core>();
  std::shared_ptr<http::HttpService> service;
  std::unique_ptr<net::ssl::context> tls;  // set with --http-use-ssl
  std::optional<tcp::acceptor> acceptor;
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
    const uint64_t n = core->rejected_connections.fetch_add(1, std::memory_order_relaxed) + 1;
    if (n == 1 || n % 1000 == 0) {
      spdlog::warn("http: {} open connections, the limit (--http-max-connections); {} connection(s) refused so far",
                   options.max_connections, n);
    }
    if (tls || core->rejections_lingering.load(std::memory_order_relaxed) >= Rejection::kMaxLingering) {
      // HTTPS: an answer would need a TLS handshake, the very work the limit saves.
      beast::error_code ec;
      socket.close(ec);
      return;
    }
    std::make_shared<Rejection>(core, std::move(socket), over_limit_response)->Start();
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
      if (ec) {
        spdlog::warn("http: accept failed: {}", ec.message());
      } else if (core->open_connections.load(std::memory_order_relaxed) >= options.max_connections) {
        Reject(std::move(socket));
      } else {
        // Session options live in Impl, which outlives every session's use
        // of them: sessions only run on the I/O threads, joined in Stop().
        // (An SSL object holds a reference on its SSL_CTX, so the TLS
        // context may go first.)
        if (tls) {
          std::make_shared<Session<TlsStream>>(core, service, options, io_thread, std::move(socket), *tls)->Start();
        } else {
          std::make_shared<Session<Socket>>(core, service, options, io_thread, std::move(socket))->Start();
        }
      }
      DoAccept();
    });
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
          .tracer = impl->options.tracer},
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
  return impl_->core->open_connections.load(std::memory_order_relaxed);
}

uint64_t HttpServer::RejectedConnections() const {
  return impl_->core->rejected_connections.load(std::memory_order_relaxed);
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
    done.set_value();
  });
  if (s.started && !s.stopped) closed.wait();
}

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
      done.set_value();
    });
    closed.wait();
  }
  {
    std::lock_guard l(s.core->gate_mu);
    s.core->gate_open = false;
  }
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    std::lock_guard l(s.core->sessions_mu);
    for (auto& [ptr, weak] : s.core->sessions)
      if (auto session = weak.lock()) live.push_back(std::move(session));
  }
  for (auto& session : live) session->PostClose();
  live.clear();
  for (auto& io : s.core->io_threads) {  // its timer would keep the thread running a while
    IoThread* t = io.get();
    net::post(t->ioc, [t] { t->deadlines.Stop(); });
  }
  for (auto& guard : s.work) guard.reset();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  s.acceptor.reset();
  s.accepting.reset();
}

}  // namespace ortserve
