#pragma once
// Which malloc this process runs on, found at run time rather than assumed
// from the build: the binaries link jemalloc by default (CMake option
// ORTSERVE_ALLOCATOR), but LD_PRELOAD or a sanitizer build can put another
// one in place, and the startup log and ortserve_build_info should say which
// one is really serving the allocations.
#include <string>

namespace ortserve {

// "jemalloc 5.3.0", "mimalloc 2.0.9", "asan", "tsan", "glibc 2.36", or the
// file name of whatever other library defines malloc ("libtcmalloc.so.4").
std::string MallocName();

}  // namespace ortserve
