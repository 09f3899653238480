#pragma once
// Mutexes whose lock discipline the compiler checks. Under clang with
// -Wthread-safety (scripts/check_thread_safety.sh, run by CI) a member
// declared ORTSERVE_GUARDED_BY(mu_) may only be touched with mu_ held, and a
// function declared ORTSERVE_REQUIRES(mu_) only called with it held; other
// compilers see plain std::mutex / std::shared_mutex wrappers with no cost.
//
// Waiting on a condition variable: std::condition_variable needs the
// std::unique_lock inside MutexLock (native()). The analysis treats the
// mutex as held across the wait, which is what the code after it relies on.
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define ORTSERVE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ORTSERVE_THREAD_ANNOTATION(x)
#endif

#define ORTSERVE_CAPABILITY(x) ORTSERVE_THREAD_ANNOTATION(capability(x))
#define ORTSERVE_SCOPED_CAPABILITY ORTSERVE_THREAD_ANNOTATION(scoped_lockable)
#define ORTSERVE_GUARDED_BY(x) ORTSERVE_THREAD_ANNOTATION(guarded_by(x))
#define ORTSERVE_PT_GUARDED_BY(x) ORTSERVE_THREAD_ANNOTATION(pt_guarded_by(x))
#define ORTSERVE_ACQUIRED_BEFORE(...) ORTSERVE_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ORTSERVE_REQUIRES(...) ORTSERVE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ORTSERVE_REQUIRES_SHARED(...) ORTSERVE_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ORTSERVE_ACQUIRE(...) ORTSERVE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ORTSERVE_ACQUIRE_SHARED(...) ORTSERVE_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define ORTSERVE_RELEASE(...) ORTSERVE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ORTSERVE_RELEASE_SHARED(...) ORTSERVE_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define ORTSERVE_RELEASE_GENERIC(...) ORTSERVE_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define ORTSERVE_TRY_ACQUIRE(...) ORTSERVE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ORTSERVE_EXCLUDES(...) ORTSERVE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ORTSERVE_NO_THREAD_SAFETY_ANALYSIS ORTSERVE_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace ortserve {

class ORTSERVE_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ORTSERVE_ACQUIRE() { mu_.lock(); }
  void Unlock() ORTSERVE_RELEASE() { mu_.unlock(); }
  bool TryLock() ORTSERVE_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For MutexLock and for code that must hand the raw mutex to a waiter
  // registry (tests/fakes/FakeSchedulerClock).
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope (or until Unlock()).
class ORTSERVE_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ORTSERVE_ACQUIRE(mu) : lock_(mu.native()) {}
  // Spins briefly (bounded, pausing the core) before sleeping on the mutex:
  // for locks held about a microsecond at a time, where a futex sleep and
  // wake-up cost several microseconds each (docs/decisions.md, "Queue lock
  // taken with a bounded spin (LockSoon)").
  enum SpinFirst { kSpinFirst };
  MutexLock(Mutex& mu, SpinFirst) ORTSERVE_ACQUIRE(mu) : lock_(SpinThenLock(mu)) {}
  ~MutexLock() ORTSERVE_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() ORTSERVE_RELEASE() { lock_.unlock(); }
  void Lock() ORTSERVE_ACQUIRE() { lock_.lock(); }

  // The lock itself, for std::condition_variable waits.
  std::unique_lock<std::mutex>& native() { return lock_; }
  void Wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <typename Predicate>
  void Wait(std::condition_variable& cv, Predicate ready) {
    cv.wait(lock_, std::move(ready));
  }

 private:
  static std::unique_lock<std::mutex> SpinThenLock(Mutex& mu);
  std::unique_lock<std::mutex> lock_;
};

class ORTSERVE_CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ORTSERVE_ACQUIRE() { mu_.lock(); }
  void Unlock() ORTSERVE_RELEASE() { mu_.unlock(); }
  void LockShared() ORTSERVE_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() ORTSERVE_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for its scope.
class ORTSERVE_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ORTSERVE_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~WriterLock() ORTSERVE_RELEASE() { mu_.Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared for its scope.
class ORTSERVE_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ORTSERVE_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.LockShared(); }
  ~ReaderLock() ORTSERVE_RELEASE() { mu_.UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

inline std::unique_lock<std::mutex> MutexLock::SpinThenLock(Mutex& mu) {
  constexpr int kSpins = 64;
  for (int i = 0; i < kSpins; ++i) {
    if (mu.native().try_lock()) return std::unique_lock<std::mutex>(mu.native(), std::adopt_lock);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
  }
  return std::unique_lock<std::mutex>(mu.native());
}

}  // namespace ortserve
