#include "repository/ModelSigning.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

#include "config/ModelFiles.h"
#include "repository/SigningBundle.h"
#include "repository/SigningKeys.h"
#include "runtime/Sha256.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSignatureFile = "model.sig";

bool UnderPrefix(const std::string& name, const std::string& prefix) {
  return name == prefix || name.starts_with(prefix + "/");
}

// What one model.sig covers for one version.
struct Scope {
  fs::path root;             // the signed folder; names are relative to it
  std::string version_dir;   // "" (version-level signature) or "<v>" (model-level)
  // Whether `name` (relative to root) is this version's concern: model-level,
  // anything but the other versions' folders.
  bool Covers(const std::string& name) const {
    if (version_dir.empty()) return true;
    const std::string top = name.substr(0, name.find('/'));
    const bool is_version_folder =
        name.find('/') != std::string::npos && !top.empty() && std::all_of(top.begin(), top.end(), ::isdigit);
    return !is_version_folder || top == version_dir;
  }
  bool InVersionFolder(const std::string& name) const {
    return version_dir.empty() || UnderPrefix(name, version_dir);
  }
};

// The files in scope, by name; model.sig itself left out.
Result<std::vector<std::string>> ListScope(const Scope& scope) {
  std::vector<std::string> names;
  std::error_code ec;
  // Symlinked folders are followed (a version folder may be one), as far as
  // kMaxDepth: files are named by their path inside the signed folder.
  constexpr int kMaxDepth = 32;
  fs::recursive_directory_iterator it(scope.root, fs::directory_options::follow_directory_symlink, ec), end;
  if (ec) return Unavailable("cannot list " + scope.root.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Unavailable("cannot list " + scope.root.string() + ": " + ec.message());
    if (it.depth() > kMaxDepth) return Unavailable("folders nested deeper than 32 in " + scope.root.string());
    std::error_code file_ec;
    if (it->is_directory(file_ec)) continue;
    const std::string name = it->path().lexically_relative(scope.root).generic_string();
    if (name == kSignatureFile || !scope.Covers(name)) continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The files on disk against the signed list: each file present is signed
// with its digest, each signed one present.
Status CompareFiles(const Scope& scope, const SignedManifest& manifest) {
  auto names = ListScope(scope);
  if (!names.ok()) return names.status();
  auto ignored = [&](const std::string& name) {
    if (scope.InVersionFolder(name)) return false;
    return std::any_of(manifest.ignore_paths.begin(), manifest.ignore_paths.end(),
                       [&](const std::string& p) { return UnderPrefix(name, p); });
  };
  for (const std::string& name : names.value()) {
    auto signed_file = manifest.files.find(name);
    if (signed_file == manifest.files.end()) {
      if (ignored(name)) continue;
      return Unavailable("file '" + name + "' is not covered by the signature (added after signing?)");
    }
    const std::optional<std::string> digest = Sha256File(scope.root / name);
    if (!digest) return Unavailable("cannot read " + (scope.root / name).string());
    if (*digest != signed_file->second) {
      return Unavailable("file '" + name + "' does not match the signature (SHA-256 " + *digest +
                         ", signed " + signed_file->second + ")");
    }
  }
  for (const auto& [name, digest] : manifest.files) {
    if (scope.Covers(name) && !std::binary_search(names->begin(), names->end(), name)) {
      return Unavailable("file '" + name + "' is signed but missing");
    }
  }
  return Status::Ok();
}

// Files the config makes the load read must be signed files of the folder.
Status CheckNamedFiles(const Scope& scope, const SignedManifest& manifest, const std::vector<fs::path>& named) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(scope.root, ec);
  for (const fs::path& file : named) {
    const fs::path resolved = fs::weakly_canonical(fs::absolute(file, ec), ec);
    const fs::path relative = resolved.lexically_relative(root);
    const std::string name = relative.generic_string();
    if (relative.empty() || name.starts_with("..") || !manifest.files.contains(name)) {
      return Unavailable("file '" + file.string() + "' is read by the load but not covered by " +
                         (scope.root / kSignatureFile).string());
    }
  }
  return Status::Ok();
}

}  // namespace

Status LoadSigningKeys(ModelSigningOptions* signing) {
  auto keys = SigningKeys::Load(signing->public_key_files, signing->certificate_chain_files);
  if (!keys.ok()) return keys.status();
  signing->keys = std::make_shared<const SigningKeys>(std::move(keys).value());
  return Status::Ok();
}

std::optional<SignaturePolicy> ParseSignaturePolicy(const std::string& text) {
  if (text == "off") return SignaturePolicy::kOff;
  if (text == "warn") return SignaturePolicy::kWarn;
  if (text == "require") return SignaturePolicy::kRequire;
  return std::nullopt;
}

Status CheckModelSignature(const fs::path& model_dir, int64_t version, const std::vector<fs::path>& named_files,
                           const ModelSigningOptions& signing) {
  const std::string v = std::to_string(version);
  std::error_code ec;
  Scope scope{model_dir / v, ""};
  if (!fs::exists(scope.root / kSignatureFile, ec)) {
    scope = {model_dir, v};
    if (!fs::exists(scope.root / kSignatureFile, ec)) {
      return Unavailable("no model.sig in " + model_dir.string() + " or " + (model_dir / v).string());
    }
  }
  const fs::path sig_path = scope.root / kSignatureFile;
  auto text = ReadFile(sig_path);
  if (!text.ok()) return text.status();
  auto bundle = ParseSigningBundle(text.value());
  if (!bundle.ok()) return Unavailable(sig_path.string() + ": " + bundle.status().message());
  const std::shared_ptr<const SigningKeys>& keys = signing.keys;
  if (!keys || keys->empty()) {
    return Unavailable("no --model-signing-public-key or --model-signing-certificate-chain to check " +
                       sig_path.string() + " with");
  }
  if (Status verified = keys->Verify(bundle.value()); !verified.ok()) {
    return Unavailable(sig_path.string() + ": " + verified.message());
  }
  auto manifest = ParseSignedManifest(bundle->payload);
  if (!manifest.ok()) return Unavailable(sig_path.string() + ": " + manifest.status().message());
  if (Status compared = CompareFiles(scope, manifest.value()); !compared.ok()) {
    return Unavailable(sig_path.string() + ": " + compared.message());
  }
  return CheckNamedFiles(scope, manifest.value(), named_files);
}

}  // namespace ortserve
