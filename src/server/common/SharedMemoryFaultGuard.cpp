#include "server/common/SharedMemoryFaultGuard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace ortserve::common {
namespace {

// Mappings alive at once: registered regions (--max-shm-regions is at most
// 4096) plus unregistered ones that requests still hold.
constexpr size_t kSlots = 8192;
constexpr uintptr_t kReserved = 1;  // a slot being filled

// Read by the signal handler without locks: a slot's begin is published
// (release) after its end, and cleared before its end.
std::atomic<uintptr_t> g_begin[kSlots];
std::atomic<uintptr_t> g_end[kSlots];
std::atomic<uint64_t> g_faults{0};
uintptr_t g_page_size = 4096;
struct sigaction g_previous {};
std::once_flag g_installed;

void ForwardToPrevious(int signal_number, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal_number, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(signal_number);
    return;
  }
  // The default action: restore it; returning re-executes the access, which
  // faults again and ends the process as it would have without this handler.
  signal(SIGBUS, SIG_DFL);
}

void OnSigbus(int signal_number, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (size_t i = 0; i < kSlots; ++i) {
    const uintptr_t begin = g_begin[i].load(std::memory_order_acquire);
    if (begin <= kReserved || address < begin) continue;
    const uintptr_t end = g_end[i].load(std::memory_order_relaxed);
    if (address >= end) continue;
    const uintptr_t page = address & ~(g_page_size - 1);
    // mmap is a plain system call here; it replaces the pages in place.
    void* zeros = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ | PROT_WRITE,
                       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (zeros != MAP_FAILED) {
      g_faults.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    break;
  }
  ForwardToPrevious(signal_number, info, context);
}

void Install() {
  g_page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

bool ProtectSharedMemoryMapping(void* base, size_t length) {
  std::call_once(g_installed, Install);
  const auto begin = reinterpret_cast<uintptr_t>(base);
  for (size_t i = 0; i < kSlots; ++i) {
    uintptr_t expected = 0;
    if (!g_begin[i].compare_exchange_strong(expected, kReserved, std::memory_order_acq_rel)) continue;
    g_end[i].store(begin + length, std::memory_order_relaxed);
    g_begin[i].store(begin, std::memory_order_release);
    return true;
  }
  return false;
}

void ReleaseSharedMemoryMapping(void* base) {
  const auto begin = reinterpret_cast<uintptr_t>(base);
  for (size_t i = 0; i < kSlots; ++i) {
    uintptr_t expected = begin;
    if (g_begin[i].compare_exchange_strong(expected, kReserved, std::memory_order_acq_rel)) {
      g_end[i].store(0, std::memory_order_relaxed);
      g_begin[i].store(0, std::memory_order_release);
      return;
    }
  }
}

uint64_t SharedMemoryFaultsAnswered() { return g_faults.load(std::memory_order_relaxed); }

}  // namespace ortserve::common
