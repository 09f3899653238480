#pragma once
// One trace-setting request of Triton's trace extension, whatever the
// protocol (HTTP GET/POST /v2[/models/<m>]/trace/setting, gRPC TraceSetting):
// the model check, the change, and the settings answered, as (name, values)
// pairs both front ends render (HTTP: trace_level an array, the others
// strings; gRPC: each a SettingValue). The rules are in
// server/tracing/TraceSettings.h.
#include <string>
#include <utility>
#include <vector>

#include "core/Status.h"
#include "repository/ModelRepository.h"
#include "server/tracing/TraceSettings.h"

namespace ortserve::common {

using TraceSettingFields = std::vector<std::pair<std::string, std::vector<std::string>>>;

// `model` empty: the global setting. A model that is not ready is
// kInvalidArgument "Request for unknown model : <m>" (Triton's words and code).
// `change` null: a read.
Result<TraceSettingFields> ServeTraceSetting(ModelRepository& repository, tracing::TraceSettings& settings,
                                             const std::string& model, const tracing::TraceSettingsChange* change);

}  // namespace ortserve::common
