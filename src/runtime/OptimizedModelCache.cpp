#include "runtime/OptimizedModelCache.h"

#include <onnxruntime_cxx_api.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/Sha256.h"

namespace ortserve {
namespace {

namespace fs = std::filesystem;

// The CPU's feature flags (the first "flags" line of /proc/cpuinfo): MLAS
// picks kernels and NCHWc block sizes from them.
std::string CpuFeatures() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return line;
  }
  return "unknown";
}

std::string ProvidersText(const RuntimeOptions& options) {
  std::string text = "cpu";
  for (const auto& provider : options.execution_providers) {
    text += ";" + provider.name;
    for (const auto& [key, value] : provider.options) text += "," + key + "=" + value;
  }
  return text;
}

// The model file first, then every other regular file of its directory in
// name order (external data sits beside the model).
bool AddModelFiles(Sha256& hash, const fs::path& model) {
  if (!hash.AddFile(model)) return false;
  std::vector<fs::path> others;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model.parent_path(), ec)) {
    if (entry.is_regular_file(ec) && entry.path().filename() != model.filename()) others.push_back(entry.path());
  }
  if (ec) return false;
  std::sort(others.begin(), others.end());
  for (const auto& path : others) {
    hash.Add(path.filename().string());
    if (!hash.AddFile(path)) return false;
  }
  return true;
}

// A file's identity for the digests below: path, inode, size, change time.
std::string FileStamp(const fs::path& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  return path.string() + "|" + std::to_string(st.st_ino) + "|" + std::to_string(st.st_size) + "|" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "|" +
         std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

std::string ReadSmallFile(const fs::path& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

// Digests already computed, by file stamp: in memory for this process (a
// version's other instances, reloads), and as small files under
// <cache>/digests for later processes, so that a restart does not read a
// large unchanged model or entry again. A stamp includes the change time,
// which every write and rename moves, so a stamp never outlives the bytes
// it was computed from.
class DigestMemo {
 public:
  template <typename Compute>
  std::string Get(const fs::path& cache_dir, const std::string& stamp, Compute compute) {
    if (stamp.empty()) return compute();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto found = digests_.find(stamp);
      if (found != digests_.end()) return found->second;
    }
    Sha256 name;
    name.Add(stamp);
    const fs::path file = cache_dir / "digests" / name.Hex().substr(0, 32);
    std::string digest = ReadSmallFile(file);
    if (digest.size() != 64) {
      digest = compute();
      if (!digest.empty()) Store(file, digest);
    }
    if (!digest.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      digests_[stamp] = digest;
    }
    return digest;
  }

 private:
  static void Store(const fs::path& file, const std::string& digest) {
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    const fs::path staging = file.string() + ".tmp-" + std::to_string(getpid());
    {
      std::ofstream out(staging, std::ios::trunc);
      out << digest << "\n";
      if (!out.flush()) return;
    }
    fs::rename(staging, file, ec);
    if (ec) fs::remove(staging, ec);
  }

  std::mutex mu_;
  std::map<std::string, std::string> digests_;
};

DigestMemo& Memo() {
  static DigestMemo* memo = new DigestMemo();  // never destroyed: used until exit
  return *memo;
}

std::string FileChecksum(const fs::path& cache_dir, const fs::path& path) {
  return Memo().Get(cache_dir, FileStamp(path), [&] { return Sha256File(path).value_or(""); });
}

// The model's files' digest ("" when a file cannot be read).
std::string ModelFilesDigest(const fs::path& cache_dir, const fs::path& model) {
  std::string stamp = FileStamp(model);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model.parent_path(), ec)) {
    if (entry.path() != model) stamp += "\n" + FileStamp(entry.path());
  }
  return Memo().Get(cache_dir, ec ? std::string() : stamp, [&] {
    Sha256 hash;
    return AddModelFiles(hash, model) ? hash.Hex() : std::string();
  });
}


// Keeps a cache file name readable: the label's model name, safe characters only.
std::string FilePrefix(const std::string& label) {
  std::string name = label.substr(0, label.find(':'));
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return name.substr(0, 64);
}

}  // namespace

Result<OptimizedModelEntry> OptimizedModelEntry::Find(const RuntimeOptions& options) {
  const fs::path dir = options.optimized_model_cache_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status(StatusCode::kInternal, "cannot create " + dir.string() + ": " + ec.message());
  const std::string model_digest = ModelFilesDigest(dir, options.model_path);
  if (model_digest.empty()) return Status(StatusCode::kInternal, "cannot read the files of " + options.model_path);
  Sha256 hash;
  hash.Add(model_digest);
  hash.Add(Ort::GetVersionString());
  hash.Add(std::to_string(static_cast<int>(options.graph_optimization_level)));
  hash.Add(ProvidersText(options));
  hash.Add(CpuFeatures());
  // Custom-operator libraries may bring schemas that shape inference (and so
  // the optimizations) use; none: the key stays what it was without them.
  for (const std::string& library : options.op_libraries) hash.Add("op_library=" + library);
  for (const auto& [key, value] : options.config_entries) hash.Add("config_entry=" + key + "=" + value);
  const std::string name = FilePrefix(options.label) + "-" + hash.Hex().substr(0, 32);
  OptimizedModelEntry entry;
  entry.label_ = options.label;
  entry.dir_ = dir.string();
  entry.path_ = (dir / (name + ".onnx")).string();
  entry.checksum_path_ = (dir / (name + ".sha256")).string();
  // One staging file per process and load: concurrent servers sharing the
  // directory never write into each other's file.
  static std::atomic<int> next_staging{0};
  entry.staging_path_ =
      (dir / (name + ".onnx.tmp-" + std::to_string(getpid()) + "-" + std::to_string(next_staging++))).string();
  return entry;
}

bool OptimizedModelEntry::Usable() const {
  std::error_code ec;
  if (!fs::exists(path_, ec)) return false;
  const std::string expected = ReadSmallFile(checksum_path_);
  if (expected.empty()) {
    Discard("its checksum file is missing");
    return false;
  }
  if (FileChecksum(dir_, path_) != expected) {
    Discard("its checksum does not match (corrupt or partly written)");
    return false;
  }
  return true;
}

bool OptimizedModelEntry::Commit() const {
  const std::string checksum = Sha256File(staging_path_).value_or("");
  std::error_code ec;
  if (checksum.empty()) {
    spdlog::warn("{}: optimized-model cache: ORT saved no graph to {}; not cached", label_, staging_path_);
    DropStaging();
    return false;
  }
  const std::string checksum_staging = staging_path_ + ".sha256";
  {
    std::ofstream out(checksum_staging, std::ios::trunc);
    out << checksum << "\n";
    if (!out.flush()) ec = std::make_error_code(std::errc::io_error);
  }
  // The graph is moved into place first: a graph without its checksum is
  // rebuilt, never trusted.
  if (!ec) fs::rename(staging_path_, path_, ec);
  if (!ec) fs::rename(checksum_staging, checksum_path_, ec);
  if (ec) {
    spdlog::warn("{}: optimized-model cache: cannot store {}: {}", label_, path_, ec.message());
    fs::remove(checksum_staging, ec);
    DropStaging();
    return false;
  }
  Memo().Get(dir_, FileStamp(path_), [&] { return checksum; });  // the version's next instances hash nothing
  spdlog::info("{}: optimized-model cache: saved {}", label_, path_);
  return true;
}

void OptimizedModelEntry::Discard(const std::string& why) const {
  spdlog::warn("{}: optimized-model cache: ignoring {}: {}; rebuilding it", label_, path_, why);
  std::error_code ec;
  fs::remove(path_, ec);
  fs::remove(checksum_path_, ec);
}

void OptimizedModelEntry::DropStaging() const {
  std::error_code ec;
  fs::remove(staging_path_, ec);
}

}  // namespace ortserve
