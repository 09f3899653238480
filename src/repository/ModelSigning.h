#pragma once
// The load-time check of a model version against its OpenSSF model-signing
// signature (docs/signing.md): which model.sig covers the version, that it
// was signed by a trusted key, and that the files on disk are exactly the
// signed ones.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/Status.h"
#include "repository/ModelRepository.h"

namespace ortserve {

// Checks version `version` of the model in `model_dir`:
//   - <model_dir>/<version>/model.sig, when present, covers that version's
//     folder (names relative to it); otherwise <model_dir>/model.sig covers
//     the model folder (names relative to it) less the other versions'
//     folders;
//   - every file in the covered part must be signed with its SHA-256 and
//     every signed file in it must exist (the signature's ignore_paths may
//     leave out files outside the version folder only);
//   - `named_files` (what the config makes the load read beyond the version
//     folder: label files, op libraries, warm-up data, initial states) must
//     lie inside the signed folder and be signed;
//   - the signature verifies with a --model-signing-public-key key or, for a
//     certificate-based one, a chain to a --model-signing-certificate-chain
//     certificate (SigningKeys.h): `signing.keys`, read by LoadSigningKeys.
// kUnavailable naming the file or the check that failed; Ok otherwise. The
// policy (off/warn/require) is the caller's.
Status CheckModelSignature(const std::filesystem::path& model_dir, int64_t version,
                           const std::vector<std::filesystem::path>& named_files,
                           const ModelSigningOptions& signing);

// Reads `signing`'s public key and certificate chain files into its keys:
// kInvalidArgument naming a file that holds no supported key or certificate.
Status LoadSigningKeys(ModelSigningOptions* signing);

// "off", "warn", "require" (--model-signature-policy); nullopt otherwise.
std::optional<SignaturePolicy> ParseSignaturePolicy(const std::string& text);

}  // namespace ortserve
