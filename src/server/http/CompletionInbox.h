#pragma once
// Completions handed to one I/O thread by other threads (model workers, the
// repository's loader). A push onto an empty inbox posts one drain handler,
// which runs everything pushed by then in arrival order: a batch of N
// completions costs the I/O thread one asio handler instead of N, and the
// pushing thread takes no lock the I/O thread needs (asio's post locks the
// io_context's queue, which the I/O thread locks for every handler it runs;
// under a small model's load the I/O thread was found waiting there).
// The inbox is a lock-free stack (push: compare-and-swap of the head; drain:
// take the whole list and reverse it), so no pop-one ABA problem arises.
// Internal to src/server/http.
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>

#include "server/http/SessionBase.h"

namespace ortserve::http {

class CompletionInbox {
 public:
  explicit CompletionInbox(boost::asio::io_context& ioc) : ioc_(ioc) {}
  CompletionInbox(const CompletionInbox&) = delete;
  CompletionInbox& operator=(const CompletionInbox&) = delete;

  // Completions never run (the server stopped first) are destroyed unrun.
  ~CompletionInbox();

  // Any thread. `fn` runs on the I/O thread unless `session` is closed by then.
  void Push(std::shared_ptr<SessionBase> session, std::function<void()> fn);

 private:
  // A node carries its session, so that the drain skips closed ones without
  // a closure of its own per completion.
  struct Node {
    std::shared_ptr<SessionBase> session;
    std::function<void()> fn;
    Node* next;
  };

  // The io_context's thread. What is pushed meanwhile posts the next drain.
  void Drain();
  static void Free(Node* n);

  boost::asio::io_context& ioc_;
  std::atomic<Node*> head_{nullptr};
};

}  // namespace ortserve::http
