#include "repository/ModelDirectory.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ortserve {

namespace fs = std::filesystem;

bool IsModelName(const std::string& name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

std::optional<int64_t> ParseVersionDir(const std::string& name) {
  if (name.empty() || name.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v <= 0) return std::nullopt;
  return v;
}

std::vector<std::string> ListModelDirs(const std::string& repository) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(repository, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code dir_ec;
    if (!IsModelName(name) || !entry.is_directory(dir_ec)) continue;
    names.push_back(name);
  }
  if (ec) spdlog::error("cannot list model repository {}: {}", repository, ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

std::string FileStamp(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return "-";
  const auto mtime = fs::last_write_time(path, ec);
  if (ec) return "-";
  return std::to_string(mtime.time_since_epoch().count()) + ":" + std::to_string(size);
}

namespace {

// DirectoryStamp's text, followed with `top_files` by the folder's own files
// (ListedStamp's), from one walk of `dir`.
std::string StampOf(const fs::path& dir, bool top_files) {
  std::string stamp = "config=" + FileStamp(dir / "config.pbtxt");
  std::error_code ec;
  std::vector<std::string> items;  // the version folders and their files
  std::vector<std::string> files;  // the folder's own files
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code entry_ec;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(entry_ec)) {
      if (!ParseVersionDir(name)) continue;
      items.push_back(name + "/");
      for (const auto& file : fs::directory_iterator(entry.path(), entry_ec)) {
        items.push_back(name + "/" + file.path().filename().string() + "=" + FileStamp(file.path()));
      }
    } else if (top_files && name != "config.pbtxt" && entry.is_regular_file(entry_ec)) {
      files.push_back(name + "=" + FileStamp(entry.path()));
    }
  }
  std::sort(items.begin(), items.end());
  std::sort(files.begin(), files.end());
  for (const auto& i : items) stamp += ";" + i;
  for (const auto& f : files) stamp += ";" + f;
  return stamp;
}

}  // namespace

std::string DirectoryStamp(const fs::path& dir) { return StampOf(dir, /*top_files=*/false); }

std::string ListedStamp(const fs::path& dir) { return StampOf(dir, /*top_files=*/true); }

}  // namespace ortserve
