// Custom-operator libraries that cannot be registered fail session creation
// and model inspection with a message naming the library and the loader's
// reason. (Registering a real library is tested end to end in
// tests/integration/test_op_libraries.py with onnxruntime-extensions.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/OrtModelInstance.h"

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
