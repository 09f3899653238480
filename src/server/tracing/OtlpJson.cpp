#include "server/tracing/OtlpJson.h"

#include <string_view>

#include "server/json/JsonWriter.h"

namespace ortserve::tracing {
namespace {

void WriteStringAttribute(JsonWriter& w, std::string_view key, std::string_view value) {
  w.StartObject();
  w.Key("key");
  w.String(key);
  w.Key("value");
  w.StartObject();
  w.Key("stringValue");
  w.String(value);
  w.EndObject();
  w.EndObject();
}

void WriteAttribute(JsonWriter& w, const SpanAttribute& attribute) {
  if (const auto* text = std::get_if<std::string>(&attribute.value)) {
    WriteStringAttribute(w, attribute.key, *text);
    return;
  }
  w.StartObject();
  w.Key("key");
  w.String(attribute.key);
  w.Key("value");
  w.StartObject();
  w.Key("intValue");  // int64: a decimal string in the protobuf JSON mapping
  w.String(std::to_string(std::get<int64_t>(attribute.value)));
  w.EndObject();
  w.EndObject();
}

void WriteSpan(JsonWriter& w, const Span& span) {
  w.StartObject();
  w.Key("traceId");
  w.String(span.context.trace_id.Hex());
  w.Key("spanId");
  w.String(span.context.span_id.Hex());
  if (span.parent_span_id.valid()) {
    w.Key("parentSpanId");
    w.String(span.parent_span_id.Hex());
  }
  w.Key("name");
  w.String(span.name);
  w.Key("kind");
  w.Int(static_cast<int>(span.kind));
  w.Key("startTimeUnixNano");
  w.String(std::to_string(span.start_unix_ns));
  w.Key("endTimeUnixNano");
  w.String(std::to_string(span.end_unix_ns));
  w.Key("attributes");
  w.StartArray();
  for (const SpanAttribute& attribute : span.attributes) WriteAttribute(w, attribute);
  w.EndArray();
  if (!span.links.empty()) {
    w.Key("links");
    w.StartArray();
    for (const SpanContext& link : span.links) {
      w.StartObject();
      w.Key("traceId");
      w.String(link.trace_id.Hex());
      w.Key("spanId");
      w.String(link.span_id.Hex());
      w.EndObject();
    }
    w.EndArray();
  }
  w.Key("status");
  w.StartObject();
  if (span.error) {
    w.Key("code");
    w.Int(2);  // STATUS_CODE_ERROR
  }
  w.EndObject();
  w.EndObject();
}

}  // namespace

std::string EncodeOtlpJson(std::span<const Span> spans, const OtlpResource& resource) {
  std::string out;
  out.reserve(256 + spans.size() * 512);
  JsonWriter w(&out);
  w.StartObject();
  w.Key("resourceSpans");
  w.StartArray();
  w.StartObject();
  w.Key("resource");
  w.StartObject();
  w.Key("attributes");
  w.StartArray();
  WriteStringAttribute(w, "service.name", resource.service_name);
  if (!resource.service_version.empty()) WriteStringAttribute(w, "service.version", resource.service_version);
  w.EndArray();
  w.EndObject();
  w.Key("scopeSpans");
  w.StartArray();
  w.StartObject();
  w.Key("scope");
  w.StartObject();
  w.Key("name");
  w.String("ortserve");
  if (!resource.service_version.empty()) {
    w.Key("version");
    w.String(resource.service_version);
  }
  w.EndObject();
  w.Key("spans");
  w.StartArray();
  for (const Span& span : spans) WriteSpan(w, span);
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  w.EndArray();
  w.EndObject();
  return out;
}

}  // namespace ortserve::tracing
