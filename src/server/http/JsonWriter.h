#pragma once
// The HTTP front end's JSON helpers: the shared writer (server/json/JsonWriter.h)
// and the KServe error body.
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

}  // namespace ortserve::http
