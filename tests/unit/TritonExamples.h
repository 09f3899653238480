#pragma once
// Triton's quick-start example repository (simple, simple_int8,
// simple_string, simple_sequence, simple_dyna_sequence) as a test parameter:
//   "generated": tests/data/triton-examples, the equivalent repository that
//                scripts/make_triton_examples.py writes (committed, so the
//                tests need no Python);
//   "triton":    the folder TRITON_EXAMPLES_DIR names, a copy of Triton's own
//                files; the test skips, saying so, when it is not set.
// A suite derives from TritonExamplesTest and is instantiated with
// INSTANTIATE_TRITON_EXAMPLES(Suite); dir() is the repository folder.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ortserve::testing_util {

class TritonExamplesTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "generated") {
      dir_ = std::filesystem::path(ORTSERVE_SOURCE_DIR) / "tests" / "data" / "triton-examples";
      return;
    }
    const char* env = std::getenv("TRITON_EXAMPLES_DIR");
    if (env == nullptr || *env == '\0') {
      GTEST_SKIP() << "TRITON_EXAMPLES_DIR is not set (a copy of Triton's example repository)";
    }
    dir_ = env;
    if (!std::filesystem::is_regular_file(dir_ / "simple" / "config.pbtxt")) {
      GTEST_SKIP() << "TRITON_EXAMPLES_DIR=" << dir_ << " has no simple/config.pbtxt";
    }
  }

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace ortserve::testing_util

#define INSTANTIATE_TRITON_EXAMPLES(suite)                                                 \
  INSTANTIATE_TEST_SUITE_P(Repositories, suite, ::testing::Values("generated", "triton"), \
                           [](const ::testing::TestParamInfo<std::string>& info) { return info.param; })
