// The reference check's parameters (config/ReferenceConfig.h) and its .npy
// samples (repository/ReferenceSamples.h). The check itself runs on real
// models in tests/integration/test_reference_check.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ParsedConfig.h"
#include "config/ReferenceConfig.h"
#include "repository/ReferenceSamples.h"

namespace ortserve {
namespace {

using ::testing::HasSubstr;

std::string Params(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string text = "name: \"m\"\n";
  for (const auto& [k, v] : kv) text += "parameters { key: \"" + k + "\" value { string_value: \"" + v + "\" } }\n";
  return text;
}

TEST(ReferenceConfig, AbsentWithoutReferenceParameters) {
  auto r = ReferenceConfig::FromConfig(Parse(Params({{"rollout_steps", "5"}})));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().has_value());
}

TEST(ReferenceConfig, ReadsEveryKey) {
  auto r = ReferenceConfig::FromConfig(Parse(Params({{"reference_model", "model_fp32.onnx"},
                                                     {"reference_samples", "ref"},
                                                     {"reference_tolerance", "0.05"},
                                                     {"reference_min_agreement", "0.99"}})));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r.value().has_value());
  EXPECT_EQ(r.value()->model_file, "model_fp32.onnx");
  EXPECT_EQ(r.value()->samples_dir, "ref");
  EXPECT_DOUBLE_EQ(*r.value()->tolerance, 0.05);
  EXPECT_DOUBLE_EQ(*r.value()->min_agreement, 0.99);
}

TEST(ReferenceConfig, EveryBadValueNamesItsParameter) {
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>> cases = {
      {{{"reference_model", "m.onnx"}, {"reference_tolerance", "-0.1"}}, "reference_tolerance"},
      {{{"reference_model", "m.onnx"}, {"reference_tolerance", "1e"}}, "reference_tolerance"},
      {{{"reference_model", "m.onnx"}, {"reference_tolerance", "inf"}}, "reference_tolerance"},
      {{{"reference_model", "m.onnx"}, {"reference_min_agreement", "1.01"}}, "reference_min_agreement"},
      {{{"reference_model", "../m.onnx"}, {"reference_tolerance", "1"}}, "reference_model"},
      {{{"reference_model", ".."}, {"reference_tolerance", "1"}}, "reference_model"},
      {{{"reference_model", "m.onnx"}, {"reference_tolerance", "1"}, {"reference_samples", "a/b"}},
       "reference_samples"},
      {{{"reference_model", "m.onnx"}}, "reference_tolerance"},
      {{{"reference_min_agreement", "0.9"}}, "reference_model"},
  };
  for (const auto& [kv, named] : cases) {
    auto r = ReferenceConfig::FromConfig(Parse(Params(kv)));
    ASSERT_FALSE(r.ok()) << named;
    EXPECT_THAT(r.status().message(), HasSubstr(named));
  }
}

std::string Npy(const std::string& header_dict, const std::string& data) {
  std::string header = header_dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

TEST(ParseNpy, ReadsAFloatMatrix) {
  const float values[6] = {1, 2, 3, 4, 5, 6};
  std::string data(reinterpret_cast<const char*>(values), sizeof(values));
  auto t = ParseNpy("x", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->dtype, DataType::kFp32);
  EXPECT_EQ(t->shape, (Shape{2, 3}));
  ASSERT_EQ(t->data.size(), sizeof(values));
  EXPECT_EQ(std::memcmp(t->data.data(), values, sizeof(values)), 0);
}

TEST(ParseNpy, RejectsWhatItCannotRead) {
  const std::string eight(8, '\0');
  EXPECT_FALSE(ParseNpy("x", "not numpy at all").ok());
  auto fortran = ParseNpy("x", Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", eight));
  ASSERT_FALSE(fortran.ok());
  EXPECT_THAT(fortran.status().message(), HasSubstr("Fortran"));
  auto big_endian = ParseNpy("x", Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", eight));
  ASSERT_FALSE(big_endian.ok());
  EXPECT_THAT(big_endian.status().message(), HasSubstr(">f4"));
  auto short_data = ParseNpy("x", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", eight));
  ASSERT_FALSE(short_data.ok());
  EXPECT_THAT(short_data.status().message(), HasSubstr("does not match"));
}

}  // namespace
}  // namespace ortserve
