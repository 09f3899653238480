#pragma once
// The files a model's config names inside its folder (config.pbtxt, initial
// sequence state, warm-up data), read without leaving the folder.
#include <filesystem>
#include <string>

#include "core/Status.h"

namespace ortserve {

// Ok when `relative` is a relative path with no ".." component: the
// lexical half of ResolveInside, for a config checked before its folder is
// known. The message names `relative` and, in words, `base_name`.
Status CheckRelativeInside(const std::string& relative, const std::string& base_name);

// Resolves `relative` inside `base` and refuses anything that would leave it
// (absolute paths, "..", symlinks pointing outside).
Result<std::filesystem::path> ResolveInside(const std::filesystem::path& base, const std::string& relative);

// The whole file; kUnavailable naming the path when it cannot be read.
Result<std::string> ReadFile(const std::filesystem::path& path);

}  // namespace ortserve
