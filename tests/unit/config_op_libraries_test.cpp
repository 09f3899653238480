// model_operations.op_library_filename and --op-library: which libraries a
// model's sessions register, in which order, and what a bad entry says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/ConfigParse.h"
#include "config/RuntimeConfig.h"

#include "ParsedConfig.h"

namespace ortserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(OpLibraryConfig, ModelLibrariesInConfigOrder) {
  auto settings = ReadSessionSettings(Parse(R"(
    model_operations { op_library_filename: [ "/opt/ops/libfirst.so", "libsecond.so" ] })"));
  ASSERT_TRUE(settings.ok()) << settings.status().message();
  EXPECT_THAT(settings->op_libraries, ElementsAre("/opt/ops/libfirst.so", "libsecond.so"));
}

TEST(OpLibraryConfig, ServerLibrariesComeFirstAndEachPathOnce) {
  const std::vector<std::string> server = {"/srv/libext.so", "/srv/libother.so"};
  auto settings = ReadSessionSettings(
      Parse(R"(model_operations { op_library_filename: [ "libmodel.so", "/srv/libext.so" ] })"), server);
  ASSERT_TRUE(settings.ok()) << settings.status().message();
  EXPECT_THAT(settings->op_libraries, ElementsAre("/srv/libext.so", "/srv/libother.so", "libmodel.so"));

  auto only_server = ReadSessionSettings(inference::ModelConfig(), server);
  ASSERT_TRUE(only_server.ok());
  EXPECT_EQ(only_server->op_libraries, server);
  EXPECT_THAT(ReadSessionSettings(inference::ModelConfig())->op_libraries, IsEmpty());
}

TEST(OpLibraryConfig, EmptyFilenameIsAnErrorNamingItsIndex) {
  auto settings = ReadSessionSettings(Parse(R"(
    model_operations { op_library_filename: [ "libok.so", "" ] })"));
  ASSERT_FALSE(settings.ok());
  EXPECT_EQ(settings.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(settings.status().message(), HasSubstr("model_operations.op_library_filename[1] is empty"));
}

TEST(OpLibraryConfig, EveryInstanceGetsTheLibraries) {
  auto settings = ReadSessionSettings(Parse(R"(model_operations { op_library_filename: "libops.so" })"),
                                      {"libserver.so"});
  ASSERT_TRUE(settings.ok());
  for (const bool gpu : {false, true}) {
    RuntimeOptions options = MakeRuntimeOptions(settings.value(), 1, InstanceSpec{gpu, 0},
                                                "/repo/m/1/model.onnx", "m:1#0");
    EXPECT_THAT(options.op_libraries, ElementsAre("libserver.so", "libops.so"));
  }
}

TEST(OpLibraryConfig, ModelOperationsIsNotAnIgnoredField) {
  auto config = Parse(R"(model_operations { op_library_filename: "libops.so" })");
  EXPECT_THAT(IgnoredConfigFields(config), IsEmpty());
}

}  // namespace
}  // namespace ortserve
