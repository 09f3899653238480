#pragma once
// The OTLP/HTTP JSON body of an ExportTraceServiceRequest
// (opentelemetry-proto, protobuf JSON mapping with OTLP's rules: trace and
// span ids as lowercase hex, enums as numbers, 64-bit integers as decimal
// strings, lowerCamelCase field names).
#include <span>
#include <string>

#include "server/tracing/Span.h"

namespace ortserve::tracing {

struct OtlpResource {
  std::string service_name = "ortserve";
  std::string service_version;
};

// {"resourceSpans":[{"resource":{...},"scopeSpans":[{"scope":{...},"spans":[...]}]}]}
std::string EncodeOtlpJson(std::span<const Span> spans, const OtlpResource& resource);

}  // namespace ortserve::tracing
