#pragma once
// The OpenSSF model-signing signature file (model.sig, written by the
// `model-signing` package, v1.x): a Sigstore bundle (JSON,
// application/vnd.dev.sigstore.bundle.v0.3+json) whose DSSE envelope carries
// an in-toto statement (application/vnd.in-toto+json) with predicate type
// https://model_signing/signature/v1.0 listing every signed file's SHA-256 in
// predicate.resources. Parsing only: no signature is checked here
// (SigningKeys.h verifies, ModelSigning.h compares with the files).
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"

namespace ortserve {

inline constexpr std::string_view kInTotoPayloadType = "application/vnd.in-toto+json";
inline constexpr std::string_view kModelSigningPredicate = "https://model_signing/signature/v1.0";

struct SigningBundle {
  std::string media_type;
  std::string payload_type;  // dsseEnvelope.payloadType
  std::string payload;       // dsseEnvelope.payload, base64-decoded (the statement's JSON)
  std::vector<std::string> signatures;  // dsseEnvelope.signatures[].sig, decoded (DER ECDSA or raw Ed25519)
  // verificationMaterial.publicKey.hint: hex SHA-256 of the signer's public
  // key in PEM (SubjectPublicKeyInfo); empty for bundles without one.
  std::string key_hint;
  // verificationMaterial.x509CertificateChain.certificates[].rawBytes or
  // .certificate.rawBytes (DER, leaf first): certificate-based signing.
  std::vector<std::string> certificates;
};

// The statement's file list: name (relative to the signed folder, '/'
// separated) -> lowercase hex SHA-256.
struct SignedManifest {
  std::string model_name;
  std::map<std::string, std::string> files;
  // predicate.serialization.ignore_paths: what the signer left out.
  std::vector<std::string> ignore_paths;
};

// kInvalidArgument naming the field that is missing or malformed.
Result<SigningBundle> ParseSigningBundle(std::string_view json);
// The in-toto statement; its subject digest (SHA-256 over the resources'
// digests in order) must match the resources: kInvalidArgument otherwise.
Result<SignedManifest> ParseSignedManifest(std::string_view statement_json);

// DSSE's pre-authentication encoding, what the signature is over:
// "DSSEv1 <len(type)> <type> <len(payload)> <payload>".
std::string DssePae(std::string_view payload_type, std::string_view payload);

// Standard base64 (with padding); nullopt-like failure as kInvalidArgument.
Result<std::string> DecodeBase64(std::string_view text);

}  // namespace ortserve
