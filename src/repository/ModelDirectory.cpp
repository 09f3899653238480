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

std::string DirectoryStamp(const fs::path& dir) {
  std::string stamp = "config=" + FileStamp(dir / "config.pbtxt");
  std::error_code ec;
  std::vector<std::string> items;
  for (const auto& version : fs::directory_iterator(dir, ec)) {
    std::error_code vec;
    if (!version.is_directory(vec) || !ParseVersionDir(version.path().filename().string())) continue;
    items.push_back(version.path().filename().string() + "/");
    for (const auto& file : fs::directory_iterator(version.path(), vec)) {
      items.push_back(version.path().filename().string() + "/" + file.path().filename().string() + "=" +
                      FileStamp(file.path()));
    }
  }
  std::sort(items.begin(), items.end());
  for (const auto& i : items) stamp += ";" + i;
  return stamp;
}

std::string ListedStamp(const fs::path& dir) {
  std::string stamp = DirectoryStamp(dir);
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& file : fs::directory_iterator(dir, ec)) {
    std::error_code file_ec;
    const std::string name = file.path().filename().string();
    if (name != "config.pbtxt" && file.is_regular_file(file_ec)) files.push_back(name + "=" + FileStamp(file.path()));
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) stamp += ";" + f;
  return stamp;
}

}  // namespace ortserve
