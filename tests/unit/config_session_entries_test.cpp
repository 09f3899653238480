// parameters "session.<ort key>" and --backend-config=onnxruntime,session.<key>=V:
// which ONNX Runtime session config entries a model's sessions get, in which
// order, and what a parameter with no key says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "config/ConfigParse.h"
#include "config/RuntimeConfig.h"

#include "ParsedConfig.h"

namespace ortserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Entry = std::pair<std::string, std::string>;

std::string Param(const std::string& key, const std::string& value) {
  return "parameters { key: \"" + key + "\" value { string_value: \"" + value + "\" } }\n";
}

TEST(SessionConfigEntries, PrefixIsStrippedAndKeysComeInKeyOrder) {
  auto settings = ReadSessionSettings(Parse(Param("session.session.disable_prepacking", "1") +
                                            Param("session.mlas.disable_kleidiai", "1") +
                                            Param("intra_op_thread_count", "2")));
  ASSERT_TRUE(settings.ok()) << settings.status().message();
  EXPECT_THAT(settings->config_entries,
              ElementsAre(Entry{"mlas.disable_kleidiai", "1"}, Entry{"session.disable_prepacking", "1"}));
  EXPECT_THAT(ReadSessionSettings(inference::ModelConfig())->config_entries, IsEmpty());
}

TEST(SessionConfigEntries, ModelReplacesTheServersEntry) {
  const SessionConfigEntries server = {{"session.disable_prepacking", "1"}, {"session.use_env_allocators", "1"}};
  auto settings =
      ReadSessionSettings(Parse(Param("session.session.use_env_allocators", "0")), {}, server);
  ASSERT_TRUE(settings.ok()) << settings.status().message();
  EXPECT_THAT(settings->config_entries,
              ElementsAre(Entry{"session.disable_prepacking", "1"}, Entry{"session.use_env_allocators", "0"}));
  RuntimeOptions options = MakeRuntimeOptions(*settings, 1, InstanceSpec{}, "/m/1/model.onnx", "m:1");
  EXPECT_EQ(options.config_entries, settings->config_entries);
}

TEST(SessionConfigEntries, KeyMustFollowThePrefix) {
  auto settings = ReadSessionSettings(Parse(Param("session.", "1")));
  ASSERT_FALSE(settings.ok());
  EXPECT_THAT(settings.status().message(), HasSubstr("parameter 'session.' names no ONNX Runtime session key"));
  EXPECT_TRUE(IsKnownParameter("session.session.disable_prepacking"));
}

}  // namespace
}  // namespace ortserve
