#pragma once
// Triton's trace extension over HTTP (GET/POST /v2[/models/<m>]/trace/setting):
// a POST body as a change, and the settings as JSON. The rules live in
// server/tracing/TraceSettings.h, the request in server/common/TraceSettingRequest.h.
#include <string>

#include "core/Status.h"
#include "server/common/TraceSettingRequest.h"
#include "server/tracing/TraceSettings.h"

namespace ortserve::http {

// {"trace_level":["TIMESTAMPS"],"trace_rate":"1000",...}: trace_level an
// array of strings, every other setting a string.
std::string TraceSettingJson(const common::TraceSettingFields& fields);

// A POST body: a JSON object (empty body: no change). A value is a string
// (Triton's form; a JSON integer is taken too), trace_level an array of
// strings, null clears the setting.
Result<tracing::TraceSettingsChange> ParseTraceSettingsChange(const std::string& body);

}  // namespace ortserve::http
