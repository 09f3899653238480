#pragma once
// An HTTP I/O thread: its io_context and the per-thread services of its
// connections, and the stream types of a connection living on it.
// Internal to src/server/http.
//
// A connection stays on one I/O thread for its whole life, so its handlers
// run one at a time without a strand, and the thread that sees a socket event
// runs its handler itself: a single io_context run by several threads hands
// every event from the thread waiting in epoll to another one (a futex wake
// and a context switch per request).
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "server/http/CompletionInbox.h"
#include "server/http/ConnectionDeadlines.h"
#include "server/http/DeferredCloseMonitors.h"

namespace ortserve::http {

struct IoThread {
  boost::asio::io_context ioc{/*concurrency_hint=*/1};  // first: destroyed after the services using it
  DeferredCloseMonitors close_monitors;
  ConnectionDeadlines deadlines{ioc};
  CompletionInbox completions{ioc};
  // Client connections on this thread, from their session's construction
  // (on the accepting thread) to its destruction (core/InlineRuns.h).
  std::atomic<int> connections{0};
};

// The thread's loop: io_context::run, except that while close monitors are
// deferred it runs one handler at a time, so that it sees the moment it runs
// out of work (and arms them) and can sweep them on time while busy. Returns
// once the io_context is stopped or out of work.
void RunIoThread(IoThread& io);

// A connection's socket, its executor the I/O thread's io_context by type.
// Beast's tcp_stream over the default any_io_executor copied and destroyed a
// type-erased executor in every read and write handler and added its own
// operation layer, for timeouts that ConnectionDeadlines does instead: a
// measurable share of a small request's I/O-thread time.
using Socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::io_context::executor_type>;
using TlsStream = boost::beast::ssl_stream<Socket>;

}  // namespace ortserve::http
