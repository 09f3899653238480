#pragma once
// The HTTP front end's JSON helpers: the shared writer (server/json/JsonWriter.h),
// the KServe error body and the per-version views' envelope.
#include <string>
#include <string_view>

#include "server/json/JsonWriter.h"

namespace ortserve::http {

using ortserve::JsonWriter;

// {"error":"<message>"}
inline std::string ErrorJson(std::string_view message) {
  std::string s;
  s.reserve(message.size() + 16);
  s.append("{\"error\":");
  JsonWriter::AppendQuoted(&s, message);
  s.push_back('}');
  return s;
}

// {"model":"<model>","versions":[...]}, the envelope of the per-version
// views (drift, shadow); `write_versions(w)` writes the array's items.
template <typename WriteVersions>
std::string ModelVersionsJson(const std::string& model, WriteVersions&& write_versions) {
  std::string out;
  JsonWriter w(&out);
  w.StartObject();
  w.Key("model");
  w.String(model);
  w.Key("versions");
  w.StartArray();
  write_versions(w);
  w.EndArray();
  w.EndObject();
  return out;
}

}  // namespace ortserve::http
