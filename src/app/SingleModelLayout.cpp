#include "app/SingleModelLayout.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace ortserve::app {
namespace {

namespace fs = std::filesystem;

bool IsVersionDir(const fs::directory_entry& e) {
  const std::string n = e.path().filename().string();
  std::error_code ec;
  return e.is_directory(ec) && !n.empty() && n.size() < 19 &&
         std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsOnnxFile(const fs::directory_entry& e) {
  std::error_code ec;
  return e.is_regular_file(ec) && e.path().extension() == ".onnx";
}

bool HoldsOnnxFile(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (IsOnnxFile(e)) return true;
  }
  return false;
}

}  // namespace

bool IsSingleModelDirectory(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename() == "config.pbtxt" || IsOnnxFile(e)) return true;
    if (IsVersionDir(e) && HoldsOnnxFile(e.path())) return true;
  }
  return false;
}

Result<std::string> LinkSingleModelRepository(const std::string& dir, const std::string& name,
                                              const std::string& work_dir) {
  const fs::path source = fs::absolute(dir);
  const fs::path model = fs::path(work_dir) / name;
  std::error_code ec;
  fs::remove_all(work_dir, ec);
  if (fs::create_directories(model, ec); ec) {
    return Internal("cannot create '" + model.string() + "' for the single-model directory: " + ec.message());
  }
  std::vector<fs::directory_entry> files, versions, onnx;
  bool has_config = false;
  for (const auto& e : fs::directory_iterator(source, ec)) {
    if (e.path().filename() == "config.pbtxt") {
      has_config = true;
    } else if (IsVersionDir(e)) {
      versions.push_back(e);
    } else if (!e.is_directory(ec) || !e.path().filename().string().starts_with('.')) {
      files.push_back(e);
      if (IsOnnxFile(e)) onnx.push_back(e);
    }
  }
  std::error_code link_error;  // the first link that failed
  auto link = [&link_error](const fs::path& target, const fs::path& at) {
    std::error_code e;
    fs::create_symlink(target, at, e);
    if (e && !link_error) link_error = e;
  };
  if (has_config) link(source / "config.pbtxt", model / "config.pbtxt");
  for (const auto& v : versions) link(v.path(), model / v.path().filename());
  if (versions.empty()) {
    const bool has_model_onnx = fs::exists(source / "model.onnx");
    if (!has_model_onnx && onnx.size() > 1) {
      return InvalidArgument("single-model directory '" + dir + "' holds " + std::to_string(onnx.size()) +
                             " .onnx files and no model.onnx: name the model's file model.onnx");
    }
    fs::create_directories(model / "1", link_error);
    for (const auto& f : files) link(f.path(), model / "1" / f.path().filename());
    if (!has_model_onnx && onnx.size() == 1) link(onnx[0].path(), model / "1" / "model.onnx");
  }
  if (link_error) {
    return Internal("cannot link the single-model directory '" + dir + "': " + link_error.message());
  }
  return work_dir;
}

std::string SingleModelWorkDir() {
  return (fs::temp_directory_path() / ("ortserve-single-model-" + std::to_string(getpid()))).string();
}

SingleModelLinksRemover::SingleModelLinksRemover(const std::string& repository) {
  if (std::string dir = SingleModelWorkDir(); repository == dir) linked_ = std::move(dir);
}

SingleModelLinksRemover::~SingleModelLinksRemover() {
  if (linked_.empty()) return;
  std::error_code ec;  // only links and their folders: nothing they point to
  fs::remove_all(linked_, ec);
  if (ec) spdlog::warn("cannot remove the single-model links in {}: {}", linked_, ec.message());
}

Status MapSingleModelRepository(std::string* repository, const std::string& name) {
  if (name.empty() || !IsSingleModelDirectory(*repository)) return Status::Ok();
  auto linked = LinkSingleModelRepository(*repository, name, SingleModelWorkDir());
  if (!linked.ok()) return linked.status();
  spdlog::info("{} holds a single model: serving it as '{}' (links in {})", *repository, name, linked.value());
  *repository = linked.value();
  return Status::Ok();
}

}  // namespace ortserve::app
