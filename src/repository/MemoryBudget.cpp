#include "repository/MemoryBudget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace ortserve {

std::string EvictionHold(const ResidentModel& m) {
  if (m.loading) return "being loaded";
  if (m.pinned) return "pinned";
  if (m.requests > 0) {
    return std::to_string(m.requests) + (m.requests == 1 ? " request" : " requests") + " queued or running";
  }
  if (m.open_sequences > 0) {
    return std::to_string(m.open_sequences) + (m.open_sequences == 1 ? " open sequence" : " open sequences");
  }
  if (!m.ensemble_in_use.empty()) return "composing model of ensemble '" + m.ensemble_in_use + "' in use";
  return "";
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value >= 10 || value == std::floor(value)) {
    std::snprintf(text, sizeof(text), "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

Result<std::vector<std::string>> PlanEviction(uint64_t budget, const std::string& loading, uint64_t need,
                                              const std::vector<ResidentModel>& resident) {
  uint64_t used = 0;
  for (const auto& m : resident) used += m.bytes;
  if (budget == 0 || used + need <= budget) return std::vector<std::string>{};
  if (need > budget) {
    return Unavailable("model memory budget " + FormatBytes(budget) + " exhausted: loading '" + loading +
                       "' needs " + FormatBytes(need) + ", more than the whole budget");
  }
  std::vector<const ResidentModel*> evictable;
  std::vector<const ResidentModel*> held;
  for (const auto& m : resident) (EvictionHold(m).empty() ? evictable : held).push_back(&m);
  std::stable_sort(evictable.begin(), evictable.end(), [](const ResidentModel* a, const ResidentModel* b) {
    return a->last_used_ns != b->last_used_ns ? a->last_used_ns < b->last_used_ns : a->name < b->name;
  });
  std::vector<std::string> victims;
  for (const ResidentModel* m : evictable) {
    if (used + need <= budget) break;
    victims.push_back(m->name);
    used -= m->bytes;
  }
  if (used + need <= budget) return victims;
  uint64_t held_bytes = 0;
  std::string holders;
  for (const ResidentModel* m : held) {
    held_bytes += m->bytes;
    holders += (holders.empty() ? "" : ", ") + m->name + " (" + FormatBytes(m->bytes) + ", " + EvictionHold(*m) + ")";
  }
  return Unavailable("model memory budget " + FormatBytes(budget) + " exhausted: loading '" + loading + "' needs " +
                     FormatBytes(need) + ", " + FormatBytes(held_bytes) + " held by " + holders);
}

Result<uint64_t> ParseByteSize(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string suffix = text.substr(digits);
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  uint64_t unit = 0;
  if (suffix.empty() || suffix == "B") unit = 1;
  if (suffix == "K" || suffix == "KB" || suffix == "KIB") unit = uint64_t{1} << 10;
  if (suffix == "M" || suffix == "MB" || suffix == "MIB") unit = uint64_t{1} << 20;
  if (suffix == "G" || suffix == "GB" || suffix == "GIB") unit = uint64_t{1} << 30;
  if (digits == 0 || digits > 15 || unit == 0) {
    return InvalidArgument("'" + text + "' is not a byte size (a whole number with an optional K, M or G suffix)");
  }
  const uint64_t count = std::stoull(text.substr(0, digits));
  if (count > UINT64_MAX / unit) return InvalidArgument("'" + text + "' is too large a byte size");
  return count * unit;
}

uint64_t EstimateResidentBytes(const std::filesystem::path& version_dir, bool ensemble) {
  if (ensemble) return 0;
  uint64_t files = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(version_dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uint64_t size = it->file_size(size_ec);
      if (!size_ec) files += size;
    }
  }
  return kResidentVersionOverhead + static_cast<uint64_t>(static_cast<double>(files) * kResidentFileFactor);
}

}  // namespace ortserve
