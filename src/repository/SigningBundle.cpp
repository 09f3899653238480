#include "repository/SigningBundle.h"

#include <openssl/evp.h>
#include <simdjson.h>

#include "runtime/Sha256.h"

namespace ortserve {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

Status Malformed(std::string_view what, std::string_view field) {
  return InvalidArgument(std::string(what) + ": '" + std::string(field) + "' is missing or not the expected type");
}

Result<std::string> StringField(object o, std::string_view field, std::string_view what) {
  std::string_view s;
  if (o[field].get_string().get(s) != simdjson::SUCCESS) return Malformed(what, field);
  return std::string(s);
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// verificationMaterial: the key hint and any certificates.
Status ReadVerificationMaterial(object material, SigningBundle* b) {
  object key;
  if (material["publicKey"].get_object().get(key) == simdjson::SUCCESS) {
    std::string_view hint;
    if (key["hint"].get_string().get(hint) == simdjson::SUCCESS) b->key_hint = std::string(hint);
  }
  auto add_cert = [b](element cert) -> Status {
    std::string_view raw;
    if (cert["rawBytes"].get_string().get(raw) != simdjson::SUCCESS) {
      return Malformed("signature bundle certificate", "rawBytes");
    }
    auto der = DecodeBase64(raw);
    if (!der.ok()) return der.status();
    b->certificates.push_back(std::move(der).value());
    return Status::Ok();
  };
  object chain;
  array certs;
  if (material["x509CertificateChain"].get_object().get(chain) == simdjson::SUCCESS &&
      chain["certificates"].get_array().get(certs) == simdjson::SUCCESS) {
    for (element cert : certs) ORTSERVE_RETURN_IF_ERROR(add_cert(cert));
  }
  element cert;
  if (material["certificate"].get(cert) == simdjson::SUCCESS) ORTSERVE_RETURN_IF_ERROR(add_cert(cert));
  return Status::Ok();
}

}  // namespace

Result<std::string> DecodeBase64(std::string_view text) {
  if (text.size() % 4 != 0) return InvalidArgument("base64 text has a length that is not a multiple of 4");
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return InvalidArgument("malformed base64");
  size_t padding = 0;
  if (!text.empty() && text.back() == '=') ++padding;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++padding;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

std::string DssePae(std::string_view payload_type, std::string_view payload) {
  return "DSSEv1 " + std::to_string(payload_type.size()) + " " + std::string(payload_type) + " " +
         std::to_string(payload.size()) + " " + std::string(payload);
}

Result<SigningBundle> ParseSigningBundle(std::string_view json) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(json.data(), json.size()).get(root) != simdjson::SUCCESS) {
    return InvalidArgument("signature bundle is not valid JSON");
  }
  object bundle, material, envelope;
  if (root.get_object().get(bundle) != simdjson::SUCCESS) return InvalidArgument("signature bundle is not a JSON object");
  SigningBundle b;
  auto media = StringField(bundle, "mediaType", "signature bundle");
  if (!media.ok()) return media.status();
  b.media_type = std::move(media).value();
  if (bundle["verificationMaterial"].get_object().get(material) != simdjson::SUCCESS) {
    return Malformed("signature bundle", "verificationMaterial");
  }
  ORTSERVE_RETURN_IF_ERROR(ReadVerificationMaterial(material, &b));
  if (bundle["dsseEnvelope"].get_object().get(envelope) != simdjson::SUCCESS) {
    return Malformed("signature bundle (only DSSE bundles are model signatures)", "dsseEnvelope");
  }
  auto type = StringField(envelope, "payloadType", "DSSE envelope");
  if (!type.ok()) return type.status();
  b.payload_type = std::move(type).value();
  auto payload64 = StringField(envelope, "payload", "DSSE envelope");
  if (!payload64.ok()) return payload64.status();
  auto payload = DecodeBase64(payload64.value());
  if (!payload.ok()) return InvalidArgument("DSSE envelope payload: " + payload.status().message());
  b.payload = std::move(payload).value();
  array signatures;
  if (envelope["signatures"].get_array().get(signatures) != simdjson::SUCCESS) {
    return Malformed("DSSE envelope", "signatures");
  }
  for (element s : signatures) {
    std::string_view sig64;
    if (s["sig"].get_string().get(sig64) != simdjson::SUCCESS) return Malformed("DSSE signature", "sig");
    auto sig = DecodeBase64(sig64);
    if (!sig.ok()) return InvalidArgument("DSSE signature: " + sig.status().message());
    b.signatures.push_back(std::move(sig).value());
  }
  if (b.signatures.empty()) return InvalidArgument("DSSE envelope has no signature");
  return b;
}

Result<SignedManifest> ParseSignedManifest(std::string_view statement_json) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(statement_json.data(), statement_json.size()).get(root) != simdjson::SUCCESS) {
    return InvalidArgument("signed statement is not valid JSON");
  }
  object statement, predicate;
  if (root.get_object().get(statement) != simdjson::SUCCESS) return InvalidArgument("signed statement is not an object");
  auto type = StringField(statement, "predicateType", "signed statement");
  if (!type.ok()) return type.status();
  if (type.value() != kModelSigningPredicate) {
    return InvalidArgument("signed statement has predicate type '" + type.value() + "', expected '" +
                           std::string(kModelSigningPredicate) + "'");
  }
  array subjects, resources;
  if (statement["subject"].get_array().get(subjects) != simdjson::SUCCESS || subjects.size() != 1) {
    return InvalidArgument("signed statement must have exactly one subject");
  }
  std::string_view name, root_digest;
  if (subjects.at(0)["name"].get_string().get(name) != simdjson::SUCCESS ||
      subjects.at(0)["digest"]["sha256"].get_string().get(root_digest) != simdjson::SUCCESS) {
    return Malformed("signed statement subject", "name/digest.sha256");
  }
  if (statement["predicate"].get_object().get(predicate) != simdjson::SUCCESS ||
      predicate["resources"].get_array().get(resources) != simdjson::SUCCESS) {
    return Malformed("signed statement", "predicate.resources");
  }
  std::string_view method;
  if (predicate["serialization"]["method"].get_string().get(method) != simdjson::SUCCESS) {
    return Malformed("signed statement", "predicate.serialization.method");
  }
  if (method != "files") {
    return InvalidArgument("signed statement uses serialization method '" + std::string(method) +
                           "': only 'files' (one digest per file) is supported");
  }
  SignedManifest m;
  m.model_name = std::string(name);
  std::string all_digests;  // the resources' raw digests in order: what the subject digest is over
  for (element r : resources) {
    std::string_view file, algorithm, digest;
    if (r["name"].get_string().get(file) != simdjson::SUCCESS ||
        r["algorithm"].get_string().get(algorithm) != simdjson::SUCCESS ||
        r["digest"].get_string().get(digest) != simdjson::SUCCESS) {
      return Malformed("signed resource", "name/algorithm/digest");
    }
    if (algorithm != "sha256" || digest.size() != 64 || !IsLowerHex(digest)) {
      return InvalidArgument("signed resource '" + std::string(file) + "' is not a SHA-256 digest (algorithm '" +
                             std::string(algorithm) + "')");
    }
    if (!m.files.emplace(std::string(file), std::string(digest)).second) {
      return InvalidArgument("signed resource '" + std::string(file) + "' is listed twice");
    }
    for (size_t i = 0; i < digest.size(); i += 2) {
      auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
      all_digests.push_back(static_cast<char>(nibble(digest[i]) << 4 | nibble(digest[i + 1])));
    }
  }
  if (Sha256Hex(all_digests) != root_digest) {
    return InvalidArgument("signed statement is inconsistent: its subject digest does not match its resources");
  }
  array ignored;
  if (predicate["serialization"]["ignore_paths"].get_array().get(ignored) == simdjson::SUCCESS) {
    for (element p : ignored) {
      std::string_view path;
      if (p.get_string().get(path) == simdjson::SUCCESS) m.ignore_paths.emplace_back(path);
    }
  }
  return m;
}

}  // namespace ortserve
