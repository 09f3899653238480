#include "server/common/SharedMemoryRegistry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "server/common/SharedMemoryFaultGuard.h"

namespace ortserve::common {

// The mapping of one registered region: the pages from the page holding
// `offset` to the region's end, and the object's descriptor (kept to re-check
// the object's size on every use).
class SharedMemoryMapping {
 public:
  SharedMemoryMapping(SharedMemoryRegionStatus status, int fd, void* base, size_t length, size_t delta)
      : status_(std::move(status)), fd_(fd), base_(base), length_(length), start_(static_cast<std::byte*>(base) + delta) {}
  ~SharedMemoryMapping() {
    ReleaseSharedMemoryMapping(base_);
    munmap(base_, length_);
    close(fd_);
  }
  SharedMemoryMapping(const SharedMemoryMapping&) = delete;
  SharedMemoryMapping& operator=(const SharedMemoryMapping&) = delete;

  const SharedMemoryRegionStatus& status() const { return status_; }
  std::byte* start() const { return start_; }
  // The object's current size in bytes; -1 when fstat fails.
  int64_t ObjectSize() const {
    struct stat st {};
    return fstat(fd_, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
  }

 private:
  const SharedMemoryRegionStatus status_;
  const int fd_;
  void* const base_;
  const size_t length_;
  std::byte* const start_;
};

namespace {

constexpr std::string_view kReservedKeyPrefix = "triton_python_backend_shm_region_";
constexpr size_t kMaxKeyNameLength = 255;  // NAME_MAX of the file under /dev/shm

std::string Quote(std::string_view s) {
  std::string quoted;
  quoted.reserve(s.size() + 2);
  quoted.append(1, '\'').append(s.substr(0, 300)).append(1, '\'');
  return quoted;
}

std::string Errno() { return std::strerror(errno); }

Status RegisterError(const std::string& name, const std::string& why) {
  return InvalidArgument("failed to register shared memory region " + Quote(name) + ": " + why);
}

// Opens `key` and checks that [offset, offset + byte_size) lies inside it;
// the descriptor on success (the caller closes it).
Result<int> OpenObject(const std::string& name, const std::string& key, uint64_t offset, uint64_t byte_size) {
  // glibc's shm_open adds O_NOFOLLOW | O_CLOEXEC and opens under /dev/shm.
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) {
    // Triton's status and words (its clients and QA match them), then ours.
    return Internal("Unable to open shared memory region: " + Quote(key) + " (registering " + Quote(name) +
                    ": unable to open shared memory object: " + Errno() + ")");
  }
  struct stat st {};
  std::string why;
  if (byte_size == 0) {
    why = "invalid args: byte_size must be positive";
  } else if (fstat(fd, &st) != 0) {
    why = "unable to stat shared memory object " + Quote(key) + ": " + Errno();
  } else if (!S_ISREG(st.st_mode) || st.st_size < 0) {
    why = "invalid args: " + Quote(key) + " is not a shared memory object";
  } else if (byte_size > std::numeric_limits<uint64_t>::max() - offset ||
             offset + byte_size > static_cast<uint64_t>(st.st_size)) {
    why = "invalid args: offset " + std::to_string(offset) + " + byte_size " + std::to_string(byte_size) +
          " is past the end of shared memory object " + Quote(key) + " (" + std::to_string(st.st_size) + " bytes)";
  }
  if (!why.empty()) {
    close(fd);
    return RegisterError(name, why);
  }
  return fd;
}

}  // namespace

Status ValidateSharedMemoryKey(std::string_view name, std::string_view key) {
  const auto invalid = [&](const std::string& why) {
    return InvalidArgument("cannot register shared memory region " + Quote(name) + " - invalid shm key " + Quote(key) +
                           ": " + why);
  };
  const size_t first = key.find_first_not_of('/');
  if (first == std::string_view::npos) return invalid("a key names an object after its leading '/'");
  if (key.substr(first).starts_with(kReservedKeyPrefix)) {
    return InvalidArgument("cannot register shared memory region " + Quote(name) + " with key " + Quote(key) +
                           " as the key contains the reserved prefix '" + std::string(kReservedKeyPrefix) + "'");
  }
  if (key[0] != '/' || first != 1) return invalid("a key starts with exactly one '/' (POSIX shared memory name)");
  const std::string_view object = key.substr(1);
  if (object.find('/') != std::string_view::npos) return invalid("a key holds no '/' after the first (no paths)");
  if (object.find('\0') != std::string_view::npos) return invalid("a key holds no NUL character");
  if (object == "." || object == "..") return invalid("'.' and '..' name no object");
  if (object.size() > kMaxKeyNameLength) {
    return invalid("a key is at most " + std::to_string(kMaxKeyNameLength) + " characters after its '/'");
  }
  return Status::Ok();
}

Status SharedMemoryRegistry::Register(const std::string& name, const std::string& key, uint64_t offset,
                                      uint64_t byte_size) {
  if (!options_.allow_client_shm) return Unsupported(std::string(kClientShmDisabledMessage));
  if (name.empty()) return InvalidArgument("'region name' is necessary to register system shared memory region");
  ORTSERVE_RETURN_IF_ERROR(ValidateSharedMemoryKey(name, key));
  MutexLock lock(mu_);
  if (regions_.contains(name)) return InvalidArgument("shared memory region " + Quote(name) + " already in manager");
  if (regions_.size() >= options_.max_regions) {
    return Unavailable("cannot register shared memory region " + Quote(name) + ": the server holds " +
                       std::to_string(regions_.size()) + " regions, the most it allows (--max-shm-regions=" +
                       std::to_string(options_.max_regions) + "); unregister one first");
  }
  Result<int> fd = OpenObject(name, key, offset, byte_size);
  if (!fd.ok()) return fd.status();
  // mmap wants a page-aligned file offset: map from the page holding `offset`.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t aligned = offset - offset % page;
  const size_t delta = static_cast<size_t>(offset - aligned);
  const size_t length = delta + static_cast<size_t>(byte_size);
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, static_cast<off_t>(aligned));
  if (base == MAP_FAILED) {
    const std::string why = Errno();
    close(*fd);
    return RegisterError(name, "unable to map shared memory object " + Quote(key) + ": " + why);
  }
  // The mapping owns base from here; protected until it is unmapped.
  auto mapping = std::make_shared<const SharedMemoryMapping>(SharedMemoryRegionStatus{name, key, offset, byte_size},
                                                             *fd, base, length, delta);
  ProtectSharedMemoryMapping(base, length);
  regions_.emplace(name, std::move(mapping));
  return Status::Ok();
}

Status SharedMemoryRegistry::Unregister(const std::string& name) {
  if (!options_.allow_client_shm) return Unsupported(std::string(kClientShmDisabledMessage));
  // Mappings still viewed by a request outlive their entry here; the last
  // view unmaps. Those dropped here are unmapped after the lock is released.
  std::map<std::string, std::shared_ptr<const SharedMemoryMapping>> removed;
  {
    MutexLock lock(mu_);
    if (name.empty()) {
      removed.swap(regions_);
    } else if (auto node = regions_.extract(name)) {
      removed.insert(std::move(node));
    }
  }
  return Status::Ok();
}

Result<std::vector<SharedMemoryRegionStatus>> SharedMemoryRegistry::Describe(const std::string& name) const {
  std::vector<SharedMemoryRegionStatus> out;
  MutexLock lock(mu_);
  if (name.empty()) {
    out.reserve(regions_.size());
    for (const auto& [_, mapping] : regions_) out.push_back(mapping->status());
    return out;
  }
  const auto it = regions_.find(name);
  if (it == regions_.end()) return NotFound("Unable to find system shared memory region: " + Quote(name));
  out.push_back(it->second->status());
  return out;
}

Result<SharedMemoryView> SharedMemoryRegistry::View(const std::string& name, uint64_t offset,
                                                    uint64_t byte_size) const {
  std::shared_ptr<const SharedMemoryMapping> mapping;
  {
    MutexLock lock(mu_);
    const auto it = regions_.find(name);
    if (it == regions_.end()) return NotFound("Unable to find shared memory region: " + Quote(name));
    mapping = it->second;
  }
  const SharedMemoryRegionStatus& region = mapping->status();
  const std::string sizes = " (offset " + std::to_string(offset) + ", byte_size " + std::to_string(byte_size) +
                            ", region of " + std::to_string(region.byte_size) + " bytes)";
  if (offset >= region.byte_size) {
    return InvalidArgument("Invalid offset for shared memory region: " + Quote(name) + sizes);
  }
  if (byte_size > std::numeric_limits<uint64_t>::max() - offset) {
    return InvalidArgument("Integer overflow detected: byte_size (" + std::to_string(byte_size) + ") + offset (" +
                           std::to_string(offset) + ") exceeds maximum value (" +
                           std::to_string(std::numeric_limits<uint64_t>::max()) + ") for region " + Quote(name));
  }
  if (offset + byte_size > region.byte_size) {
    return InvalidArgument("Invalid offset + byte size for shared memory region: " + Quote(name) + sizes);
  }
  const int64_t object_size = mapping->ObjectSize();
  if (object_size < 0 || static_cast<uint64_t>(object_size) < region.offset + region.byte_size) {
    return InvalidArgument("shared memory region " + Quote(name) + ": its object " + Quote(region.key) +
                           " shrank below the registered range since it was registered; unregister it");
  }
  std::byte* data = mapping->start() + offset;
  return SharedMemoryView{std::move(mapping), data, static_cast<size_t>(byte_size)};
}

size_t SharedMemoryRegistry::size() const {
  MutexLock lock(mu_);
  return regions_.size();
}

}  // namespace ortserve::common
