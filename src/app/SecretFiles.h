#pragma once
// Restricted-API keys read from files, so that a key's value never appears
// on the command line (visible to every user in `ps`, /proc/<pid>/cmdline)
// and can come from a mounted Kubernetes Secret.
//
//   --http-restricted-api-file <group>[,<group>...]:<key>=<path>
//
// reads the value from <path> (trailing newline and spaces dropped, as
// `kubectl create secret --from-literal` or `echo` leave them) and yields
// the same spec --http-restricted-api takes: <group>[,...]:<key>=<value>.
#include <string>
#include <vector>

#include "core/Status.h"

namespace ortserve::app {

// Each "<groups>:<key>=<path>" turned into "<groups>:<key>=<value read from path>".
// Fails naming the flag and the file when a spec has no '=' or a file is
// unreadable or empty (a restriction without a key would lock everyone out).
Result<std::vector<std::string>> ResolveRestrictionFiles(const std::vector<std::string>& specs,
                                                         const std::string& flag_name);

}  // namespace ortserve::app
