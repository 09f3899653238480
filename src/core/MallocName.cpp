#include "core/MallocName.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>

#include <cstddef>
#include <string>

namespace ortserve {

std::string MallocName() {
  // The object that defines the malloc every call resolves to (the first in
  // the process's lookup order: an LD_PRELOAD, then the binary's own
  // libraries, then libc).
  Dl_info info{};
  void* malloc_fn = dlsym(RTLD_DEFAULT, "malloc");
  if (malloc_fn == nullptr || dladdr(malloc_fn, &info) == 0 || info.dli_fname == nullptr) return "unknown";
  const std::string file = info.dli_fname;
  void* object = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);  // already loaded: no new load
  auto symbol = [&](const char* name) { return object ? dlsym(object, name) : nullptr; };
  std::string name;
  if (file.find("libasan") != std::string::npos) {
    name = "asan";
  } else if (file.find("libtsan") != std::string::npos) {
    name = "tsan";
  } else if (file.find("jemalloc") != std::string::npos) {
    name = "jemalloc";
    using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
    const char* version = nullptr;
    size_t size = sizeof(version);
    if (auto mallctl = reinterpret_cast<Mallctl>(symbol("mallctl"));
        mallctl && mallctl("version", &version, &size, nullptr, 0) == 0 && version) {
      const std::string v(version);  // "5.3.0-0-g54eaed1d8b56..."
      name += " " + v.substr(0, v.find('-'));
    }
  } else if (file.find("mimalloc") != std::string::npos) {
    name = "mimalloc";
    using MiVersion = int (*)();
    if (auto mi_version = reinterpret_cast<MiVersion>(symbol("mi_version"))) {
      const int v = mi_version();  // 209 for 2.0.9
      name += " " + std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." + std::to_string(v % 10);
    }
  } else if (file.find("libc.so") != std::string::npos) {
    name = std::string("glibc ") + gnu_get_libc_version();
  } else {
    const size_t slash = file.rfind('/');
    name = slash == std::string::npos ? file : file.substr(slash + 1);  // e.g. libtcmalloc.so.4
  }
  if (object) dlclose(object);
  return name;
}

}  // namespace ortserve
