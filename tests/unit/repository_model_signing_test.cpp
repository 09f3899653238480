// The model-signing bundle parser, the key check and the folder comparison
// (repository/SigningBundle.h, SigningKeys.h, ModelSigning.h) on a signature
// made by `model_signing sign key` (model-signing 1.1.1) over a folder holding
// 1/model.onnx ("hello\n") and config.pbtxt ("cfg\n"): tests/data/signing/.
// ed25519.model.sig carries the same statement signed with an Ed25519 key.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "config/ModelFiles.h"
#include "repository/ModelSigning.h"
#include "repository/SigningBundle.h"
#include "repository/SigningKeys.h"
#include "runtime/Sha256.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

const fs::path kData = fs::path(ORTSERVE_SOURCE_DIR) / "tests/data/signing";

std::string Read(const fs::path& p) { return ReadFile(p).value(); }

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

TEST(SigningBundleTest, ParsesModelSigningKeyBundle) {
  auto bundle = ParseSigningBundle(Read(kData / "model.sig"));
  ASSERT_TRUE(bundle.ok()) << bundle.status().message();
  EXPECT_EQ(bundle->media_type, "application/vnd.dev.sigstore.bundle.v0.3+json");
  EXPECT_EQ(bundle->payload_type, kInTotoPayloadType);
  EXPECT_EQ(bundle->key_hint, "9f6c8160c19a80c5a86bcc6f62b36763d8da5715ef13028d855c0cfb73f05866");
  ASSERT_EQ(bundle->signatures.size(), 1u);
  EXPECT_TRUE(bundle->certificates.empty());
  auto manifest = ParseSignedManifest(bundle->payload);
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  EXPECT_EQ(manifest->model_name, "m");
  ASSERT_EQ(manifest->files.size(), 2u);
  EXPECT_EQ(manifest->files.at("1/model.onnx"), Sha256Hex("hello\n"));
  EXPECT_EQ(manifest->files.at("config.pbtxt"), Sha256Hex("cfg\n"));
  EXPECT_NE(std::find(manifest->ignore_paths.begin(), manifest->ignore_paths.end(), "model.sig"),
            manifest->ignore_paths.end());
}

TEST(SigningBundleTest, DssePaeIsTheSpecEncoding) {
  EXPECT_EQ(DssePae("http://example.com/HelloWorld", "hello world"),
            "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
}

TEST(SigningBundleTest, MalformedBundlesNameWhatIsWrong) {
  EXPECT_NE(ParseSigningBundle("{not json").status().message().find("not valid JSON"), std::string::npos);
  EXPECT_NE(ParseSigningBundle("[]").status().message().find("not a JSON object"), std::string::npos);
  EXPECT_NE(ParseSigningBundle(R"({"mediaType":"x","verificationMaterial":{}})").status().message().find(
                "dsseEnvelope"),
            std::string::npos);
  const std::string bad64 = R"({"mediaType":"x","verificationMaterial":{},"dsseEnvelope":{"payloadType":"t",)"
                            R"("payload":"a*==","signatures":[{"sig":"AAAA"}]}})";
  EXPECT_NE(ParseSigningBundle(bad64).status().message().find("base64"), std::string::npos);
  const std::string unsigned_bundle = R"({"mediaType":"x","verificationMaterial":{},"dsseEnvelope":)"
                                      R"({"payloadType":"t","payload":"","signatures":[]}})";
  EXPECT_NE(ParseSigningBundle(unsigned_bundle).status().message().find("no signature"), std::string::npos);
}

TEST(SigningBundleTest, StatementMustBeConsistent) {
  const std::string payload = ParseSigningBundle(Read(kData / "model.sig"))->payload;
  std::string other_type = payload;
  other_type.replace(other_type.find("signature/v1.0"), 14, "signature/v9.9");
  EXPECT_NE(ParseSignedManifest(other_type).status().message().find("predicate type"), std::string::npos);
  std::string changed = payload;
  const size_t digest = changed.find(Sha256Hex("hello\n"));
  ASSERT_NE(digest, std::string::npos);
  changed[digest] = changed[digest] == '0' ? '1' : '0';
  EXPECT_NE(ParseSignedManifest(changed).status().message().find("subject digest"), std::string::npos);
}

TEST(SigningKeysTest, VerifiesEcdsaAndEd25519AndNamesTheFailure) {
  auto keys = SigningKeys::Load({(kData / "other.pub.pem").string(), (kData / "signer.pub.pem").string(),
                                 (kData / "ed25519.pub.pem").string()});
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  auto ecdsa = ParseSigningBundle(Read(kData / "model.sig"));
  EXPECT_TRUE(keys->Verify(ecdsa.value()).ok());
  auto ed25519 = ParseSigningBundle(Read(kData / "ed25519.model.sig"));
  EXPECT_TRUE(keys->Verify(ed25519.value()).ok()) << keys->Verify(ed25519.value()).message();

  SigningBundle tampered = ecdsa.value();
  tampered.payload.back() = ' ';
  EXPECT_NE(keys->Verify(tampered).message().find("bad signature"), std::string::npos);
  auto only_other = SigningKeys::Load({(kData / "other.pub.pem").string()});
  EXPECT_NE(only_other->Verify(ecdsa.value()).message().find("unknown key"), std::string::npos);
  auto not_a_key = SigningKeys::Load({(kData / "model.sig").string()});
  EXPECT_NE(not_a_key.status().message().find("model.sig: no PEM public key"), std::string::npos);
}

class ModelSigningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ortserve_signing_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    Write(dir_ / "1/model.onnx", "hello\n");
    Write(dir_ / "config.pbtxt", "cfg\n");
    fs::copy_file(kData / "model.sig", dir_ / "model.sig");
  }
  void TearDown() override { fs::remove_all(dir_); }
  Status Check(const std::vector<fs::path>& named = {}) {
    ModelSigningOptions signing;
    signing.public_key_files = {(kData / "signer.pub.pem").string()};
    if (Status loaded = LoadSigningKeys(&signing); !loaded.ok()) return loaded;
    return CheckModelSignature(dir_, 1, named, signing);
  }
  fs::path dir_;
};

TEST_F(ModelSigningTest, SignedFolderVerifies) { EXPECT_TRUE(Check().ok()) << Check().message(); }

TEST_F(ModelSigningTest, KeysAreReadOnceNotForEachCheck) {
  const fs::path key = dir_.string() + "_signer.pub.pem";
  fs::copy_file(kData / "signer.pub.pem", key, fs::copy_options::overwrite_existing);
  ModelSigningOptions signing;
  signing.public_key_files = {key.string()};
  ASSERT_TRUE(LoadSigningKeys(&signing).ok());
  fs::remove(key);  // checks go on with the keys read at startup
  const Status checked = CheckModelSignature(dir_, 1, {}, signing);
  EXPECT_TRUE(checked.ok()) << checked.message();
  signing.keys = nullptr;
  EXPECT_NE(CheckModelSignature(dir_, 1, {}, signing).message().find("no --model-signing-public-key"),
            std::string::npos);
}

TEST_F(ModelSigningTest, OtherVersionsFoldersAreNotThisVersionsConcern) {
  Write(dir_ / "2/model.onnx", "unsigned version\n");
  EXPECT_TRUE(Check().ok()) << Check().message();
}

TEST_F(ModelSigningTest, EachTamperingNamesTheFile) {
  Write(dir_ / "1/extra.bin", "x");
  EXPECT_NE(Check().message().find("file '1/extra.bin' is not covered"), std::string::npos) << Check().message();
  fs::remove(dir_ / "1/extra.bin");
  Write(dir_ / "config.pbtxt", "cfg2\n");
  EXPECT_NE(Check().message().find("file 'config.pbtxt' does not match"), std::string::npos);
  Write(dir_ / "config.pbtxt", "cfg\n");
  fs::remove(dir_ / "1/model.onnx");
  EXPECT_NE(Check().message().find("file '1/model.onnx' is signed but missing"), std::string::npos);
}

TEST_F(ModelSigningTest, NamedFilesMustBeSigned) {
  EXPECT_TRUE(Check({dir_ / "config.pbtxt"}).ok());
  Write(dir_ / "../ortserve_outside_lib.so", "x");
  const Status outside = Check({dir_ / "../ortserve_outside_lib.so"});
  EXPECT_NE(outside.message().find("is read by the load but not covered"), std::string::npos) << outside.message();
  fs::remove(dir_ / "../ortserve_outside_lib.so");
}

TEST_F(ModelSigningTest, VersionSignatureTakesPrecedence) {
  Write(dir_ / "1/model.sig", "{not json");
  EXPECT_NE(Check().message().find("1/model.sig: signature bundle is not valid JSON"), std::string::npos)
      << Check().message();
  fs::remove(dir_ / "1/model.sig");
  fs::remove(dir_ / "model.sig");
  EXPECT_NE(Check().message().find("no model.sig in"), std::string::npos);
}

}  // namespace
}  // namespace ortserve
