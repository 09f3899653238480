#include "config/ModelFiles.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ortserve {

Status CheckRelativeInside(const std::string& relative, const std::string& base_name) {
  const std::filesystem::path rel(relative);
  if (relative.empty() || rel.is_absolute() || rel.has_root_name()) {
    return InvalidArgument("path '" + relative + "' must be relative to " + base_name);
  }
  for (const auto& part : rel) {
    if (part == "..") return InvalidArgument("path '" + relative + "' escapes " + base_name);
  }
  return Status::Ok();
}

Result<std::filesystem::path> ResolveInside(const std::filesystem::path& base,
                                            const std::string& relative) {
  namespace fs = std::filesystem;
  ORTSERVE_RETURN_IF_ERROR(CheckRelativeInside(relative, base.string()));
  const fs::path rel(relative);
  std::error_code ec;
  const fs::path canonical_base = fs::weakly_canonical(base, ec);
  if (ec) return InvalidArgument("cannot resolve " + base.string() + ": " + ec.message());
  const fs::path resolved = fs::weakly_canonical(canonical_base / rel, ec);
  if (ec) return InvalidArgument("cannot resolve " + relative + ": " + ec.message());
  auto [base_end, _] = std::mismatch(canonical_base.begin(), canonical_base.end(),
                                     resolved.begin(), resolved.end());
  if (base_end != canonical_base.end() || resolved == canonical_base) {
    return InvalidArgument("path '" + relative + "' escapes " + base.string());
  }
  return resolved;
}

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable("cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ortserve
