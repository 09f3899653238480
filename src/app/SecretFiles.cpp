#include "app/SecretFiles.h"

#include <fstream>
#include <iterator>

namespace ortserve::app {

Result<std::vector<std::string>> ResolveRestrictionFiles(const std::vector<std::string>& specs,
                                                         const std::string& flag_name) {
  std::vector<std::string> resolved;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq + 1 == spec.size()) {
      return InvalidArgument(flag_name + " '" + spec + "': expected <group>[,<group>...]:<key>=<file>");
    }
    const std::string path = spec.substr(eq + 1);
    std::ifstream in(path, std::ios::binary);
    if (!in) return InvalidArgument(flag_name + ": cannot read the key file '" + path + "'");
    std::string value((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!value.empty() && (value.back() == '\n' || value.back() == '\r' || value.back() == ' ' ||
                              value.back() == '\t')) {
      value.pop_back();
    }
    if (value.empty()) return InvalidArgument(flag_name + ": the key file '" + path + "' is empty");
    if (value.find('\n') != std::string::npos) {
      return InvalidArgument(flag_name + ": the key file '" + path + "' holds more than one line");
    }
    resolved.push_back(spec.substr(0, eq + 1) + value);
  }
  return resolved;
}

}  // namespace ortserve::app
