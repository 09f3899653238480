// reference_model naming another model ("model:<name>", "model:<name>/<v>"):
// its parsing, the compatibility of the two configs, the load order and the
// refusal of cycles. The check on real models runs in
// tests/integration/test_reference_check.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ParsedConfig.h"
#include "config/ConfigChecks.h"
#include "config/ReferenceConfig.h"
#include "repository/PreparedOrder.h"
#include "repository/ReferenceCheck.h"

namespace ortserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string WithReference(const std::string& name, const std::string& reference, const std::string& io = "") {
  return "name: \"" + name + "\"\n" + io + "parameters { key: \"reference_model\" value { string_value: \"" +
         reference + "\" } }\nparameters { key: \"reference_tolerance\" value { string_value: \"0.1\" } }\n";
}

TEST(ReferenceModel, ModelPrefixNamesAModelAndItsVersion) {
  auto newest = ReferenceConfig::FromConfig(Parse(WithReference("int8", "model:fp32")));
  ASSERT_TRUE(newest.ok()) << newest.status().message();
  EXPECT_EQ(newest.value()->model_name, "fp32");
  EXPECT_EQ(newest.value()->model_version, 0);
  EXPECT_TRUE(newest.value()->model_file.empty());
  EXPECT_EQ(newest.value()->Describe(), "model 'fp32'");

  auto pinned = ReferenceConfig::FromConfig(Parse(WithReference("int8", "model:fp32/3")));
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  EXPECT_EQ(pinned.value()->model_name, "fp32");
  EXPECT_EQ(pinned.value()->model_version, 3);
  EXPECT_EQ(pinned.value()->Describe(), "model 'fp32' version 3");

  // Without the prefix it stays a file of the version folder.
  auto file = ReferenceConfig::FromConfig(Parse(WithReference("int8", "fp32")));
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file.value()->model_file, "fp32");
  EXPECT_TRUE(file.value()->model_name.empty());
  EXPECT_EQ(file.value()->Describe(), "'fp32'");
}

TEST(ReferenceModel, EveryBadModelReferenceNamesReferenceModel) {
  for (const char* bad : {"model:", "model:/2", "model:fp32/", "model:fp32/0", "model:fp32/-1", "model:fp32/x",
                          "model:fp32/1/2", "model:fp32/+1", "model:.hidden", "model:a\\\\b", "model:int8"}) {
    auto r = ReferenceConfig::FromConfig(Parse(WithReference("int8", bad)));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("reference_model")) << bad;
  }
  auto self = ReferenceConfig::FromConfig(Parse(WithReference("int8", "model:int8")));
  EXPECT_THAT(self.status().message(), HasSubstr("names the model itself"));
}

TEST(ReferenceModel, ModelNameOnlyForTheModelForm) {
  auto model = ReferenceConfig::FromConfig(Parse(WithReference("a", "model:b/2")));
  ASSERT_TRUE(model.ok() && model.value());
  EXPECT_EQ(model.value()->model_name, "b");
  auto file = ReferenceConfig::FromConfig(Parse(WithReference("a", "b.onnx")));
  ASSERT_TRUE(file.ok() && file.value());
  EXPECT_EQ(file.value()->model_name, "");
  EXPECT_EQ(file.value()->model_file, "b.onnx");
}

constexpr const char* kIo = R"(max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ]
)";

TEST(ReferenceModel, CompatibleNeedsTheSameInputsOutputsAndBatching) {
  const auto model = Parse(std::string("name: \"a\"\n") + kIo);
  EXPECT_TRUE(CheckReferenceCompatible(model, Parse(std::string("name: \"b\"\n") + kIo)).ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(name: "b" max_batch_size: 8 input [ { name: "z" data_type: TYPE_FP32 dims: [ 4 ] } ]
          output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ])", "it has no input 'x'"},
      {R"(name: "b" max_batch_size: 8 input [ { name: "x" data_type: TYPE_FP16 dims: [ 4 ] } ]
          output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ])", "input 'x' is TYPE_FP16, this model's TYPE_FP32"},
      {R"(name: "b" max_batch_size: 8 input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
          output [ { name: "y" data_type: TYPE_FP32 dims: [ 5 ] } ])", "output 'y' has dims [5], this model's [3]"},
      {R"(name: "b" input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
          output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ])", "it does not batch and this model does"},
  };
  for (const auto& [reference, why] : cases) {
    Status st = CheckReferenceCompatible(model, Parse(reference));
    EXPECT_THAT(st.message(), HasSubstr(why)) << reference;
  }
}

PreparedModel Prepared(const std::string& name, const std::string& reference = "") {
  PreparedModel p;
  p.name = name;
  Candidate c;
  c.name = name;
  c.version = 1;
  c.config = Parse(reference.empty() ? "name: \"" + name + "\"" : WithReference(name, reference));
  c.reference = ReferenceConfig::FromConfig(c.config).value();
  p.candidates.push_back(c);
  return p;
}

std::vector<std::string> Names(const std::vector<PreparedModel>& prepared) {
  std::vector<std::string> names;
  for (const auto& p : prepared) names.push_back(p.name);
  return names;
}

TEST(ReferenceModel, ReferencedModelsLoadFirst) {
  std::vector<PreparedModel> prepared = {Prepared("a", "model:b"), Prepared("b", "model:c/1"), Prepared("c"),
                                         Prepared("d", "a_fp32.onnx")};
  FailReferenceCycles(prepared);
  DependentsLast(prepared);
  EXPECT_THAT(Names(prepared), ElementsAre("c", "d", "b", "a"));
  for (const auto& p : prepared) EXPECT_TRUE(p.failure.empty()) << p.name;
  EXPECT_THAT(Dependencies(prepared.back()), ElementsAre("b"));
}

TEST(ReferenceModel, ACycleFailsEveryModelOnItNamingIt) {
  std::vector<PreparedModel> prepared = {Prepared("a", "model:b"), Prepared("b", "model:c"), Prepared("c", "model:a"),
                                         Prepared("d", "model:a")};
  FailReferenceCycles(prepared);
  EXPECT_THAT(prepared[0].failure, HasSubstr("parameter 'reference_model': circular reference between models: "
                                             "a -> b -> c -> a"));
  EXPECT_THAT(prepared[1].failure, HasSubstr("b -> c -> a -> b"));
  EXPECT_THAT(prepared[2].failure, HasSubstr("c -> a -> b -> c"));
  EXPECT_TRUE(prepared[0].candidates.empty());
  EXPECT_TRUE(prepared[3].failure.empty());  // not on the cycle: it fails later, its reference not READY
}

TEST(ReferenceModel, CheckReferencedModelNamesTheMissingOrIncompatibleModel) {
  Candidate c;
  c.name = "a";
  c.version = 1;
  c.config = Parse(WithReference("a", "model:b/2", kIo));
  c.reference = ReferenceConfig::FromConfig(c.config).value();
  Status missing = CheckReferencedModel(c, [](const std::string&, int64_t) { return std::nullopt; });
  EXPECT_EQ(missing.code(), StatusCode::kUnavailable);
  EXPECT_THAT(missing.message(), HasSubstr("parameter 'reference_model': model 'b' version 2 is not READY"));

  int64_t asked = -1;
  Status other = CheckReferencedModel(c, [&](const std::string& name, int64_t version) {
    asked = version;
    return std::optional<ReferencedModel>(ReferencedModel{Parse("name: \"" + name + "\" max_batch_size: 8"), 2});
  });
  EXPECT_EQ(asked, 2);
  EXPECT_THAT(other.message(), HasSubstr("model 'b' version 2 does not match this model: it has 0 inputs"));

  Status ensemble = CheckReferencedModel(c, [](const std::string&, int64_t) {
    return std::optional<ReferencedModel>(
        ReferencedModel{Parse(std::string("name: \"b\" platform: \"ensemble\"\n") + kIo), 2});
  });
  EXPECT_THAT(ensemble.message(), HasSubstr("model 'b' version 2 is an ensemble"));

  Status fine = CheckReferencedModel(c, [](const std::string&, int64_t) {
    return std::optional<ReferencedModel>(ReferencedModel{Parse(std::string("name: \"b\"\n") + kIo), 2});
  });
  EXPECT_TRUE(fine.ok()) << fine.message();
}

TEST(ReferenceModel, FindReferenceFileLooksTheReferencedModelUpOnce) {
  Candidate c;
  c.name = "a";
  c.version = 1;
  c.model_dir = "/repo/a";
  c.model_path = "/repo/a/1/model.onnx";
  c.config = Parse(WithReference("a", "model:b", kIo));
  c.reference = ReferenceConfig::FromConfig(c.config).value();
  int lookups = 0;
  auto file = FindReferenceFile(c, [&](const std::string&, int64_t) {
    ++lookups;
    inference::ModelConfig config = Parse(std::string("name: \"b\"\n") + kIo);
    config.set_default_model_filename("model.onnx");
    return std::optional<ReferencedModel>(ReferencedModel{std::move(config), 3});
  });
  ASSERT_TRUE(file.ok()) << file.status().message();
  ASSERT_TRUE(file->has_value());
  EXPECT_EQ(**file, std::filesystem::path("/repo/b/3/model.onnx"));
  EXPECT_EQ(lookups, 1);

  // A file reference is in the version folder; no reference_model: none.
  c.config = Parse(WithReference("a", "a_fp32.onnx", kIo));
  c.reference = ReferenceConfig::FromConfig(c.config).value();
  auto in_folder = FindReferenceFile(c, [&](const std::string&, int64_t) {
    ++lookups;
    return std::optional<ReferencedModel>();
  });
  ASSERT_TRUE(in_folder.ok());
  EXPECT_EQ(in_folder->value(), std::filesystem::path("/repo/a/1/a_fp32.onnx"));
  c.reference.reset();
  auto none = FindReferenceFile(c, {});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(lookups, 1);
}

}  // namespace
}  // namespace ortserve
