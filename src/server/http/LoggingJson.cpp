#include "server/http/LoggingJson.h"

#include <simdjson.h>

#include <limits>
#include <string_view>

#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

constexpr size_t kMaxSettingsBody = 4096;

Status TypeError(std::string_view key, std::string_view expected) {
  return InvalidArgument("expect " + std::string(expected) + " for '" + std::string(key) + "'");
}

Result<bool> BoolSetting(std::string_view key, simdjson::dom::element value) {
  bool b = false;
  if (value.get_bool().get(b) != simdjson::SUCCESS) return TypeError(key, "boolean");
  return b;
}

}  // namespace

std::string LogSettingsJson(const common::LogSettings& settings) {
  std::string out;
  JsonWriter w(&out);
  w.StartObject();
  w.Key("log_file");
  w.String(settings.file);
  w.Key("log_info");
  w.Bool(settings.info);
  w.Key("log_warning");
  w.Bool(settings.warning);
  w.Key("log_error");
  w.Bool(settings.error);
  w.Key("log_verbose_level");
  w.Int(settings.verbose_level);
  w.Key("log_format");
  w.String(common::LogFormatName(settings.format));
  w.EndObject();
  return out;
}

Result<common::LogSettingsChange> ParseLogSettingsChange(const std::string& body) {
  common::LogSettingsChange change;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return change;
  if (body.size() > kMaxSettingsBody)
    return InvalidArgument("log settings request body is over " + std::to_string(kMaxSettingsBody) + " bytes");
  simdjson::dom::parser parser;
  simdjson::dom::object settings;
  if (parser.parse(body.data(), body.size(), true).get_object().get(settings) != simdjson::SUCCESS)
    return InvalidArgument("log settings request body must be a JSON object");
  for (auto [key, value] : settings) {
    if (value.is_null()) continue;  // as Triton: null leaves a setting as it is
    if (key == "log_file") return common::LogFileNotChangeable();
    if (key == "log_info" || key == "log_warning" || key == "log_error") {
      auto b = BoolSetting(key, value);
      if (!b.ok()) return b.status();
      (key == "log_info" ? change.info : key == "log_warning" ? change.warning : change.error) = *b;
    } else if (key == "log_verbose_level") {
      uint64_t level = 0;
      if (value.get_uint64().get(level) != simdjson::SUCCESS || level > std::numeric_limits<uint32_t>::max())
        return TypeError(key, "an integer in [0, 4294967295]");
      change.verbose_level = static_cast<uint32_t>(level);
    } else if (key == "log_format") {
      std::string_view name;
      if (value.get_string().get(name) != simdjson::SUCCESS) return TypeError(key, "string");
      auto format = common::ParseLogFormat(name);
      if (!format) return common::UnknownLogFormat(name);
      change.format = *format;
    } else {
      return InvalidArgument("unknown log setting '" + std::string(key.substr(0, 64)) +
                             "' (known: log_file, log_info, log_warning, log_error, log_verbose_level, log_format)");
    }
  }
  return change;
}

}  // namespace ortserve::http
