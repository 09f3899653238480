#pragma once
// What the server's per-thread services (close monitors, deadlines, the
// completion inbox) and Stop() need of a connection, whatever its stream type.
// Internal to src/server/http.
#include <chrono>
#include <cstdint>

namespace ortserve::http {

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

}  // namespace ortserve::http
