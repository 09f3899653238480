// Fuzz target: the BYTES tensor walk (core CountBytesElements), which every
// layer uses to trust 4-byte length prefixes from the wire. Checked against a
// straightforward reference walk; the input is copied into an exact-size
// buffer so ASan flags any read past its end.
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "FuzzCommon.h"

using namespace ortserve;

namespace {

std::optional<uint64_t> Reference(const uint8_t* p, size_t n) {
  uint64_t count = 0;
  uint64_t pos = 0;
  while (pos < n) {
    if (pos + 4 > n) return std::nullopt;
    const uint64_t len = uint64_t{p[pos]} | uint64_t{p[pos + 1]} << 8 | uint64_t{p[pos + 2]} << 16 |
                         uint64_t{p[pos + 3]} << 24;
    pos += 4 + len;
    if (pos > n) return std::nullopt;
    ++count;
  }
  return count;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> buf(size);
  if (size) std::memcpy(buf.data(), data, size);
  const auto got = CountBytesElements(buf.data(), buf.size());
  FUZZ_CHECK(got == Reference(data, size));
  // Every prefix of a well-formed buffer that ends on an element boundary is
  // well-formed too; a prefix that cuts an element is not.
  if (got && size > 0) {
    const auto shorter = CountBytesElements(buf.data(), size - 1);
    FUZZ_CHECK(shorter == Reference(data, size - 1));
  }
  return 0;
}
