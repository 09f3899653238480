// Restricted-API keys read from files (--http-restricted-api-file).
#include "app/SecretFiles.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace ortserve::app {
namespace {

namespace fs = std::filesystem;

fs::path WriteKey(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("ortserve_secret_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

TEST(SecretFilesTest, ValueComesFromTheFileWithoutItsTrailingNewline) {
  const fs::path key = WriteKey("ok", "s3cr3t\n");
  auto specs = ResolveRestrictionFiles({"inference,health:x-api-key=" + key.string()}, "--flag");
  ASSERT_TRUE(specs.ok()) << specs.status().message();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ(specs->front(), "inference,health:x-api-key=s3cr3t");
  fs::remove(key);
}

TEST(SecretFilesTest, MissingEmptyOrMultiLineFilesAreRefusedNamingTheFile) {
  auto missing = ResolveRestrictionFiles({"inference:k=/nonexistent/ortserve-key"}, "--flag");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/ortserve-key"), std::string::npos);
  const fs::path empty = WriteKey("empty", "\n");
  auto e = ResolveRestrictionFiles({"inference:k=" + empty.string()}, "--flag");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("empty"), std::string::npos);
  const fs::path two = WriteKey("two", "a\nb\n");
  EXPECT_FALSE(ResolveRestrictionFiles({"inference:k=" + two.string()}, "--flag").ok());
  fs::remove(empty);
  fs::remove(two);
}

TEST(SecretFilesTest, SpecWithoutAFileIsRefusedNamingTheFlag) {
  auto r = ResolveRestrictionFiles({"inference:k"}, "--http-restricted-api-file");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--http-restricted-api-file"), std::string::npos);
}

}  // namespace
}  // namespace ortserve::app
