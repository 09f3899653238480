#pragma once
// The files a model's config names inside its folder (config.pbtxt, initial
// sequence state, warm-up data), read without leaving the folder.
#include <filesystem>
#include <string>

#include "core/Status.h"

namespace ortserve {

// Resolves `relative` inside `base` and refuses anything that would leave it
// (absolute paths, "..", symlinks pointing outside).
Result<std::filesystem::path> ResolveInside(const std::filesystem::path& base, const std::string& relative);

// The whole file; kUnavailable naming the path when it cannot be read.
Result<std::string> ReadFile(const std::filesystem::path& path);

}  // namespace ortserve
