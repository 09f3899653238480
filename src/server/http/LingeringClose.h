#pragma once
// How long and how much a connection that was answered early is drained
// before it closes (lingering close). A server that answers before it has read
// the whole request (400 for a body over the limit, 431, 400 for a bad header,
// 503 beyond the connection limit) and then closes the socket with unread
// bytes makes the kernel reset the connection, and the reset can destroy the
// answer in the client's receive buffer before the client reads it: a client
// still sending its body would see "connection reset" instead of the status.
// So the server sends the answer, shuts its sending side (FIN), and reads and
// drops what the client still sends until the client closes, or until one of
// these bounds: a client that keeps sending is then cut off (reset).
// Internal to src/server/http.
#include <chrono>
#include <cstddef>

namespace ortserve::http {

struct LingeringClose {
  // Bytes drained at most after the answer.
  static constexpr size_t kMaxDrainBytes = size_t{4} << 20;
  // Time drained at most after the answer.
  static constexpr std::chrono::seconds kMaxDrainTime{2};
};

}  // namespace ortserve::http
