// The shared SHA-256: FIPS 180-2's test vector, a file's digest equal to its
// bytes', length-prefixed fields that never run into each other, and an
// unreadable file reported as such.
#include "runtime/Sha256.h"
#include "core/Hex.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ortserve {
namespace {

namespace fs = std::filesystem;

TEST(Sha256, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ToHex(std::string("\x00\xff\x10", 3)), "00ff10");
}

TEST(Sha256, FileDigestIsItsBytesDigest) {
  const fs::path file = fs::temp_directory_path() / ("ortserve_sha256_" + std::to_string(::getpid()));
  const std::string content(3 << 20, 'x');  // over several read chunks
  std::ofstream(file, std::ios::binary) << content;
  EXPECT_EQ(Sha256File(file), Sha256Hex(content));
  fs::remove(file);
  EXPECT_FALSE(Sha256File(file).has_value());
  Sha256 missing;
  EXPECT_FALSE(missing.AddFile(file));
}

TEST(Sha256, FieldsAreLengthPrefixed) {
  Sha256 a, b;
  a.Add("ab");
  a.Add("c");
  b.Add("a");
  b.Add("bc");
  EXPECT_NE(a.Hex(), b.Hex());
}

}  // namespace
}  // namespace ortserve
