// Custom-operator libraries: a registered library's operators run in the
// session (tests/ops/negate_op_library.cpp), and one that cannot be
// registered fails session creation and model inspection with a message
// naming the library and the loader's reason. (onnxruntime-extensions is
// served end to end in tests/integration/test_op_libraries.py.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/OrtModelInstance.h"

#include "TestTensors.h"

namespace ortserve {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kModel = std::string(ORTSERVE_SOURCE_DIR) + "/tests/data/runtime/identity_fp32.onnx";

RuntimeOptions OptionsWith(const std::string& library) {
  RuntimeOptions options;
  options.model_path = kModel;
  options.label = "identity_fp32";
  options.op_libraries = {library};
  return options;
}

std::string NotASharedObject() {
  const auto path = std::filesystem::temp_directory_path() / "ortserve_op_library_not_elf.so";
  std::ofstream(path) << "not a shared object";
  return path.string();
}

void ExpectRejected(const std::string& library, const std::string& reason) {
  auto instance = CreateOrtModelInstance(OptionsWith(library));
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(instance.status().message(),
              AllOf(HasSubstr("op library '" + library + "' cannot be registered"), HasSubstr(reason)));
  auto signature = InspectModel(kModel, {library});
  ASSERT_FALSE(signature.ok());
  EXPECT_THAT(signature.status().message(), AllOf(HasSubstr(library), HasSubstr(reason)));
}

const std::string kCustomModel = std::string(ORTSERVE_SOURCE_DIR) + "/tests/data/runtime/custom_negate.onnx";

TEST(OpLibraries, RegisteredLibraryRunsItsOperatorInEverySession) {
  RuntimeOptions options = OptionsWith(ORTSERVE_TEST_OP_LIBRARY);
  options.model_path = kCustomModel;
  for (int instance = 0; instance < 2; ++instance) {  // each session registers the library itself
    auto created = CreateOrtModelInstance(options);
    ASSERT_TRUE(created.ok()) << created.status().message();
    std::vector<Tensor> outputs;
    ASSERT_TRUE(created.value()->Run({testing_util::Fp32("input", {3}, {1.5f, -2.f, 0.f})}, &outputs).ok());
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_THAT(testing_util::Floats(outputs[0]), ::testing::ElementsAre(-1.5f, 2.f, -0.f));
  }
  auto signature = InspectModel(kCustomModel, {ORTSERVE_TEST_OP_LIBRARY});
  ASSERT_TRUE(signature.ok()) << signature.status().message();
  EXPECT_EQ(signature->inputs.at(0).name, "input");
}

TEST(OpLibraries, CustomOperatorWithoutItsLibraryFailsTheLoad) {
  RuntimeOptions options = OptionsWith("");
  options.op_libraries.clear();
  options.model_path = kCustomModel;
  auto created = CreateOrtModelInstance(options);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(created.status().message(), HasSubstr("Negate"));
}

TEST(OpLibraries, MissingFileNamesTheLibraryAndTheLoaderError) {
  ExpectRejected("/nonexistent/libortserve_ops.so", "No such file or directory");
}

TEST(OpLibraries, FileThatIsNotASharedObjectIsRejected) {
  // glibc says "file too short" or "invalid ELF header" depending on the size.
  auto instance = CreateOrtModelInstance(OptionsWith(NotASharedObject()));
  ASSERT_FALSE(instance.ok());
  EXPECT_THAT(instance.status().message(), HasSubstr("cannot be registered"));
  EXPECT_THAT(instance.status().message(), ::testing::AnyOf(HasSubstr("too short"), HasSubstr("ELF")));
}

TEST(OpLibraries, SharedObjectWithoutRegisterCustomOpsIsRejected) {
  // zlib is a real shared object, found by name on the library path, without the entry point.
  ExpectRejected("libz.so.1", "undefined symbol: RegisterCustomOps");
}

TEST(OpLibraries, NoLibrariesLeaveTheSessionAsItWas) {
  RuntimeOptions options = OptionsWith("");
  options.op_libraries.clear();
  EXPECT_TRUE(CreateOrtModelInstance(options).ok());
  EXPECT_TRUE(InspectModel(kModel, {}).ok());
}

}  // namespace
}  // namespace ortserve
