#include "server/http/CompletionInbox.h"

#include <boost/asio/post.hpp>
#include <utility>

namespace ortserve::http {

CompletionInbox::~CompletionInbox() { Free(head_.exchange(nullptr)); }

void CompletionInbox::Push(std::shared_ptr<SessionBase> session, std::function<void()> fn) {
  auto* node = new Node{std::move(session), std::move(fn), nullptr};
  Node* head = head_.load(std::memory_order_relaxed);
  do {
    node->next = head;
  } while (!head_.compare_exchange_weak(head, node, std::memory_order_release, std::memory_order_relaxed));
  if (head == nullptr) boost::asio::post(ioc_, [this] { Drain(); });
}

void CompletionInbox::Drain() {
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

void CompletionInbox::Free(Node* n) {
  while (n != nullptr) delete std::exchange(n, n->next);
}

}  // namespace ortserve::http
