#pragma once
// What the repository folder says, read without loading anything: model and
// version directory names, file stamps for change detection, file contents.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/Status.h"

namespace ortserve {

// A directory name that can be a model: not hidden, no path separators.
bool IsModelName(const std::string& name);

// Version directory names are positive decimal integers ("1", "42").
std::optional<int64_t> ParseVersionDir(const std::string& name);

// The model directories of `repository`, sorted; a listing error is logged.
std::vector<std::string> ListModelDirs(const std::string& repository);

// mtime (ns) and size of a file, "-" when it is missing: what "changed" means
// to a reload or a poll.
std::string FileStamp(const std::filesystem::path& path);

// Everything a poll compares: config.pbtxt and every file of every version
// directory (names, mtimes, sizes). Cheap: no file is read.
std::string DirectoryStamp(const std::filesystem::path& dir);

// DirectoryStamp and every other file of the model folder itself (a
// model-level model.sig, label files, a drift reference): what a listed
// model's prepared metadata is kept by (ListedModels.h). Files in other
// subfolders (warmup/, initial states) and outside the folder are not in it.
std::string ListedStamp(const std::filesystem::path& dir);

}  // namespace ortserve
