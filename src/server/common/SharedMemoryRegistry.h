#pragma once
// Triton's system shared memory extension: the regions clients registered,
// shared by the HTTP and gRPC front ends.
//
// A region is a POSIX shared memory object (shm_open) that the client
// created, mapped here at [offset, offset + byte_size). Requests name a
// region plus an offset and size inside it; View() checks both against the
// region (overflow included) before anything is touched, and hands out a
// view that keeps the mapping alive. Unregister removes the name at once
// (status no longer lists it, new requests cannot use it, the name can be
// registered again) while the mapping itself stays until its last in-flight
// user drops its view; only then is it unmapped.
//
// Safety: keys are confined to POSIX shared memory names (ValidateKey), so a
// client can name nothing but an object under /dev/shm; registration is
// refused unless enabled (--allow-client-shm=true), and the number of regions
// is bounded (--max-shm-regions). A client that shrinks its object after
// registering would make a read past the object's new end fault (SIGBUS):
// each View() re-checks the object's size, and a shrink that races a request
// already past that check is answered with zero pages
// (SharedMemoryFaultGuard.h) instead of ending the process.
//
// Thread-safe: any thread may call any method.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/Mutex.h"
#include "core/Status.h"

namespace ortserve::common {

// Triton's words for registration while client shared memory is disabled.
inline constexpr std::string_view kClientShmDisabledMessage =
    "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";
// The answer to a CUDA shared-memory registration: ortserve has none. Triton
// with GPUs answers a handle it cannot open "failed to register shared memory
// region: invalid args", which its clients and QA (L0_grpc) match; its
// GPU-less build's words follow as the reason.
inline std::string CudaRegisterRefusal(const std::string& region) {
  return "failed to register shared memory region: invalid args (CUDA shared memory region '" + region +
         "': GPUs not supported; ortserve has no CUDA shared memory, use system shared memory)";
}
// --max-shm-regions' default.
inline constexpr size_t kDefaultMaxSharedMemoryRegions = 128;

struct SharedMemoryOptions {
  // --allow-client-shm: register and unregister are refused (kUnsupported)
  // unless set; status answers either way.
  bool allow_client_shm = false;
  // --max-shm-regions: registered regions at most, for the whole server (a
  // client has no identity here to count per client).
  size_t max_regions = kDefaultMaxSharedMemoryRegions;
};

// What status reports of one region (Triton's fields).
struct SharedMemoryRegionStatus {
  std::string name;
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// One mapped region; unmapped when the last shared_ptr to it goes.
class SharedMemoryMapping;

// Bytes [data, data + size) of a region, kept mapped while the view lives.
struct SharedMemoryView {
  std::shared_ptr<const SharedMemoryMapping> mapping;
  std::byte* data = nullptr;
  size_t size = 0;
  // The view's bytes as a shared owner (aliasing `mapping`), for TensorData.
  std::shared_ptr<const void> owner() const { return mapping; }
};

// kInvalidArgument unless `key` is a POSIX shared memory name: one leading
// '/', then 1 to 255 characters with no '/', no NUL, not "." or "..", and not
// Triton's reserved prefix "triton_python_backend_shm_region_". `name` is the
// region's, for the message.
Status ValidateSharedMemoryKey(std::string_view name, std::string_view key);

class SharedMemoryRegistry {
 public:
  explicit SharedMemoryRegistry(SharedMemoryOptions options = {}) : options_(options) {}
  SharedMemoryRegistry(const SharedMemoryRegistry&) = delete;
  SharedMemoryRegistry& operator=(const SharedMemoryRegistry&) = delete;

  const SharedMemoryOptions& options() const { return options_; }

  // Maps [offset, offset + byte_size) of the object `key` as region `name`.
  // Refusals: kUnsupported (disabled), kInvalidArgument (empty name, bad key,
  // name taken, byte_size 0, range overflowing or past the object's end, an
  // object that cannot be opened), kUnavailable (the region limit).
  Status Register(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size);
  // Removes region `name` (every region when empty; an unknown name is not an
  // error, as in Triton). kUnsupported when disabled.
  Status Unregister(const std::string& name);
  // Every region (empty `name`), or the one named; kNotFound for an unknown
  // name.
  Result<std::vector<SharedMemoryRegionStatus>> Describe(const std::string& name) const;

  // [offset, offset + byte_size) of region `name`, checked: kNotFound for an
  // unknown region, kInvalidArgument for an offset at or past its end, an
  // overflowing offset + byte_size, or a range past its end (Triton's
  // messages), and for an object shrunk below the region since it was
  // registered.
  Result<SharedMemoryView> View(const std::string& name, uint64_t offset, uint64_t byte_size) const;

  size_t size() const;

 private:
  const SharedMemoryOptions options_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<const SharedMemoryMapping>> regions_ ORTSERVE_GUARDED_BY(mu_);
};

}  // namespace ortserve::common
