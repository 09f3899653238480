#pragma once
// SHA-256 (OpenSSL's) for the digests the server computes: the
// optimized-model cache's keys and checksums (OptimizedModelCache.h) and the
// model signature check's file digests and key hints (repository/ModelSigning.h).
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace ortserve {

// SHA-256 over a sequence of byte strings and files.
class Sha256 {
 public:
  Sha256();
  // The bytes as they are.
  void Update(std::string_view bytes);
  // One field: its length first, then its bytes, so that two fields can
  // never run into each other.
  void Add(std::string_view field);
  // The file's content, read in chunks; false when it cannot be read whole.
  bool AddFile(const std::filesystem::path& path);
  // The digest in lowercase hex; ends the hash.
  std::string Hex();

 private:
  std::unique_ptr<evp_md_ctx_st, void (*)(evp_md_ctx_st*)> ctx_;
};

// Lowercase hex SHA-256 of a file's content; nullopt when it cannot be read.
std::optional<std::string> Sha256File(const std::filesystem::path& path);
// Lowercase hex SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

}  // namespace ortserve
