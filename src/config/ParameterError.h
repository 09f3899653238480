#pragma once
// The error of a model config parameter whose value is refused, in the words
// every parameter reader uses: "parameter '<key>' value '<text>': <why>".
#include <string>
#include <string_view>

#include "core/Status.h"

namespace ortserve {

inline Status BadParameterValue(std::string_view key, std::string_view text, std::string_view why) {
  return InvalidArgument("parameter '" + std::string(key) + "' value '" + std::string(text) + "': " +
                         std::string(why));
}

}  // namespace ortserve
