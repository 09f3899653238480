#pragma once
// Keeps a client's shrunk shared memory object from crashing the server.
//
// A client may truncate its object below a range the server has mapped
// (after registering it, even while a request reads it). Touching a page past
// the object's new end raises SIGBUS, whose default action kills the
// process. While a mapping is protected, a SIGBUS inside it is answered by
// replacing the pages from the faulting one to the mapping's end with private
// zero pages (what Wayland compositors do for client buffers): the access is
// retried and reads zeros, a write goes nowhere, and the server keeps
// serving. SharedMemoryRegistry::View refuses the region from then on (the
// object's size no longer covers it). A SIGBUS anywhere else goes to the
// handler installed before (the default: the process ends).
//
// Contract: a protected range stays mapped until Release; the thread that
// faults holds a reference to the mapping, so the range cannot be released
// under the handler.
#include <cstddef>
#include <cstdint>

namespace ortserve::common {

// Protects [base, base + length) (installing the handler on first use).
// False when every slot is taken (the range then stays unprotected).
bool ProtectSharedMemoryMapping(void* base, size_t length);
// Stops protecting the range that starts at `base`; call before unmapping it.
void ReleaseSharedMemoryMapping(void* base);
// Faults answered with zero pages since the start (for tests and logs).
uint64_t SharedMemoryFaultsAnswered();

}  // namespace ortserve::common
