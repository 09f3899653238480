#include "runtime/Sha256.h"

#include <openssl/evp.h>

#include <cstdint>
#include <fstream>
#include <vector>

#include "core/Hex.h"

namespace ortserve {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }

void Sha256::Update(std::string_view bytes) { EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()); }

void Sha256::Add(std::string_view field) {
  const uint64_t size = field.size();
  EVP_DigestUpdate(ctx_.get(), &size, sizeof(size));
  Update(field);
}

bool Sha256::AddFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    Update(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  }
  return in.eof() && !in.bad();
}

std::string Sha256::Hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx_.get(), digest, &size);
  return ToHex(std::string_view(reinterpret_cast<const char*>(digest), size));
}

std::optional<std::string> Sha256File(const std::filesystem::path& path) {
  Sha256 hash;
  if (!hash.AddFile(path)) return std::nullopt;
  return hash.Hex();
}

std::string Sha256Hex(std::string_view bytes) {
  Sha256 hash;
  hash.Update(bytes);
  return hash.Hex();
}

}  // namespace ortserve
