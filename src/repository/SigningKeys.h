#pragma once
// The public keys model signatures are checked against
// (--model-signing-public-key): ECDSA P-256 / P-384 / P-521 and Ed25519, PEM
// SubjectPublicKeyInfo. The crypto is OpenSSL's.
#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "repository/SigningBundle.h"

struct evp_pkey_st;

namespace ortserve {

class SigningKeys {
 public:
  // Each file must hold one supported public key: kInvalidArgument naming
  // the file otherwise.
  static Result<SigningKeys> Load(const std::vector<std::string>& pem_files);

  // Ok when one of the keys made the bundle's first DSSE signature over the
  // envelope's PAE. A bundle with a key hint (model-signing's SHA-256 of the
  // signer's PEM public key) is checked against the key with that hint only:
  // none is "unknown key". kUnavailable naming the failed check otherwise.
  Status Verify(const SigningBundle& bundle) const;

  bool empty() const { return keys_.empty(); }

 private:
  struct Key {
    std::string file;
    std::string hint;
    std::shared_ptr<evp_pkey_st> pkey;
  };
  std::vector<Key> keys_;
};

}  // namespace ortserve
