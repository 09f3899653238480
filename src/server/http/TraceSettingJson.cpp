#include "server/http/TraceSettingJson.h"

#include <simdjson.h>

#include <optional>
#include <string_view>
#include <vector>

#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

constexpr size_t kMaxSettingsBody = 4096;

// The strings of one setting's JSON value, held in `storage` where they are
// not in the document (numbers); nullopt for null.
Result<std::optional<std::vector<std::string_view>>> SettingStrings(std::string_view key,
                                                                    simdjson::dom::element value,
                                                                    std::vector<std::string>* storage) {
  using Strings = std::vector<std::string_view>;
  if (value.is_null()) return std::optional<Strings>();
  std::string_view s;
  if (value.get_string().get(s) == simdjson::SUCCESS) return std::optional<Strings>(Strings{s});
  if (int64_t n = 0; value.get_int64().get(n) == simdjson::SUCCESS) {
    storage->push_back(std::to_string(n));
    return std::optional<Strings>(Strings{storage->back()});
  }
  simdjson::dom::array array;
  if (key == "trace_level" && value.get_array().get(array) == simdjson::SUCCESS) {
    Strings strings;
    for (simdjson::dom::element item : array) {
      if (item.get_string().get(s) != simdjson::SUCCESS)
        return InvalidArgument("'trace_level' must be an array of strings");
      strings.push_back(s);
    }
    return std::optional<Strings>(std::move(strings));
  }
  return InvalidArgument("expect " + std::string(key == "trace_level" ? "an array of strings" : "a string") +
                         " for '" + std::string(key.substr(0, 64)) + "'");
}

}  // namespace

std::string TraceSettingJson(const common::TraceSettingFields& fields) {
  std::string out;
  JsonWriter w(&out);
  w.StartObject();
  for (const auto& [name, values] : fields) {
    w.Key(name);
    if (name == "trace_level") {
      w.StartArray();
      for (const std::string& v : values) w.String(v);
      w.EndArray();
    } else {
      w.String(values.empty() ? std::string_view() : std::string_view(values.front()));
    }
  }
  w.EndObject();
  return out;
}

Result<tracing::TraceSettingsChange> ParseTraceSettingsChange(const std::string& body) {
  tracing::TraceSettingsChange change;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return change;
  if (body.size() > kMaxSettingsBody)
    return InvalidArgument("trace settings request body is over " + std::to_string(kMaxSettingsBody) + " bytes");
  simdjson::dom::parser parser;
  simdjson::dom::object settings;
  if (parser.parse(body.data(), body.size(), true).get_object().get(settings) != simdjson::SUCCESS)
    return InvalidArgument("trace settings request body must be a JSON object");
  std::vector<std::string> storage;
  storage.reserve(settings.size());  // string_views into it stay valid
  for (auto [key, value] : settings) {
    auto strings = SettingStrings(key, value, &storage);
    if (!strings.ok()) return strings.status();
    ORTSERVE_RETURN_IF_ERROR(tracing::AddTraceSettingChange(key, *strings, &change));
  }
  return change;
}

}  // namespace ortserve::http
