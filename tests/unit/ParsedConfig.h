#pragma once
// A model config from config.pbtxt text, for unit tests: a text that does
// not parse fails the calling test, which then gets an empty config.
#include <gtest/gtest.h>

#include <string>

#include "config/ConfigParse.h"
#include "config/ConfigTypes.h"

namespace ortserve {

inline inference::ModelConfig Parse(const std::string& text) {
  auto config = ParseModelConfig(text);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? config.value() : inference::ModelConfig();
}

}  // namespace ortserve
