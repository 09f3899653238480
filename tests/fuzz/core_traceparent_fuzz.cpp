// Fuzz target: W3C traceparent parsing (core ParseTraceparent), which reads a
// client's header or gRPC metadata on every traced front end. Beyond "no
// crash": whatever parses formats back to a version-00 header that parses to
// the same ids, and the ids are never all zero.
#include <cstdint>
#include <string>
#include <string_view>

#include "FuzzCommon.h"
#include "core/Trace.h"

using namespace ortserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size copy, so ASan flags any read past its end.
  const std::string header(reinterpret_cast<const char*>(data), size);
  const auto parsed = ParseTraceparent(header);
  if (!parsed) return 0;
  FUZZ_CHECK(parsed->trace_id.valid() && parsed->parent_id.valid());
  const std::string formatted = FormatTraceparent(*parsed);
  FUZZ_CHECK(formatted.size() == 55);
  const auto again = ParseTraceparent(formatted);
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(again->trace_id == parsed->trace_id && again->parent_id == parsed->parent_id &&
             again->sampled == parsed->sampled);
  // The ids are read from fixed positions of the (whitespace-trimmed) header.
  FUZZ_CHECK(header.find(parsed->trace_id.Hex()) != std::string::npos);
  FUZZ_CHECK(header.find(parsed->parent_id.Hex()) != std::string::npos);
  return 0;
}
