#pragma once
// What model signatures are checked against: public keys
// (--model-signing-public-key: ECDSA P-256 / P-384 / P-521 and Ed25519, PEM
// SubjectPublicKeyInfo) for key-based signatures, and trusted certificates
// (--model-signing-certificate-chain, PEM) for certificate-based ones. The
// crypto is OpenSSL's.
#include <memory>
#include <string>
#include <vector>

#include "core/Status.h"
#include "repository/SigningBundle.h"

struct evp_pkey_st;
struct x509_store_st;

namespace ortserve {

class SigningKeys {
 public:
  // Each key file must hold one supported public key, each chain file one
  // or more PEM certificates: kInvalidArgument naming the file otherwise.
  static Result<SigningKeys> Load(const std::vector<std::string>& pem_files,
                                  const std::vector<std::string>& certificate_chain_files = {});

  // Ok when the bundle's first DSSE signature over the envelope's PAE was
  // made by a trusted key. Key-based bundles: a key hint (model-signing's
  // SHA-256 of the signer's PEM public key) picks the key with that hint
  // (none is "unknown key"); without a hint every key is tried.
  // Certificate-based bundles (an x509 chain, signing certificate first):
  // the chain must lead to a trusted certificate (checked at the signing
  // certificate's notBefore, as model-signing does) and the signing
  // certificate must allow digital signatures or code signing; its key
  // checks the signature. kUnavailable naming the failed check otherwise.
  Status Verify(const SigningBundle& bundle) const;

  bool empty() const { return keys_.empty() && store_ == nullptr; }

 private:
  struct Key {
    std::string file;
    std::string hint;
    std::shared_ptr<evp_pkey_st> pkey;
  };
  Status VerifyCertificateBased(const SigningBundle& bundle, const std::string& message) const;

  std::vector<Key> keys_;
  std::shared_ptr<x509_store_st> store_;  // the trusted certificates; null: none given
};

}  // namespace ortserve
