#pragma once
// Triton's logging extension over HTTP (GET/POST /v2/logging): the settings
// as JSON and the change a POST body asks for. The settings themselves live
// in server/common/LogControl.h.
#include <string>

#include "core/Status.h"
#include "server/common/LogControl.h"

namespace ortserve::http {

// {"log_file":"","log_info":true,"log_warning":true,"log_error":true,
//  "log_verbose_level":0,"log_format":"default"}
std::string LogSettingsJson(const common::LogSettings& settings);

// A POST body: a JSON object of settings (empty: no change). A null value
// leaves its setting as it is. kInvalidArgument naming the setting for a
// value of the wrong type, a bad log_format or an unknown setting;
// kUnsupported for a log_file (it cannot change at run time).
Result<common::LogSettingsChange> ParseLogSettingsChange(const std::string& body);

}  // namespace ortserve::http
