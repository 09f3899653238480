// Fuzz target: the OpenSSF model-signing bundle (model.sig) parser and the
// in-toto statement inside it (repository/SigningBundle.h): every refusal
// is kInvalidArgument with a message; every accepted file digest is SHA-256 hex.
#include <cstdint>
#include <string>

#include "FuzzCommon.h"
#include "repository/SigningBundle.h"

using namespace ortserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto bundle = ParseSigningBundle(text);
  if (!bundle.ok()) {
    FUZZ_CHECK(bundle.status().code() == StatusCode::kInvalidArgument);
    FUZZ_CHECK(!bundle.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!bundle->signatures.empty());
  FUZZ_CHECK(DssePae(bundle->payload_type, bundle->payload).size() > bundle->payload.size());
  auto manifest = ParseSignedManifest(bundle->payload);
  if (!manifest.ok()) {
    FUZZ_CHECK(manifest.status().code() == StatusCode::kInvalidArgument);
    return 0;
  }
  for (const auto& [name, digest] : manifest->files) {
    FUZZ_CHECK(digest.size() == 64);
  }
  return 0;
}
