// Fuzz target: HTTP content codings (server/http/Compression).
//
// Input layout: byte 0 picks the coding (low 2 bits: 0 gzip, 1 deflate,
// 2 identity, 3 deflate), byte 1 the output cap ((b1 + 1) * 64 bytes, so
// 64 B .. 16 KiB: bombs hit the cap fast); the rest is the request body.
// Besides inflating the body under the cap, the target checks the round trip
// Compress -> Decompress of the same bytes (split in two parts) with the cap
// at exactly the size (must succeed) and one byte under (must be
// kPayloadTooLarge), that inflating in small steps (Inflater::Run with a
// budget of 1 to 64 bytes, from byte 0's high bits) ends as Decompress does,
// and feeds the bytes as header values to ParseContentEncoding /
// ChooseResponseCoding.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "FuzzCommon.h"
#include "server/http/Compression.h"

using namespace ortserve;
using ortserve::http::ContentCoding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static constexpr ContentCoding kCodings[4] = {ContentCoding::kGzip, ContentCoding::kDeflate,
                                                ContentCoding::kIdentity, ContentCoding::kDeflate};
  const ContentCoding coding = kCodings[data[0] & 3];
  const size_t cap = (size_t{data[1]} + 1) * 64;
  // The body in its own exact-size allocation (ASan sees overreads).
  const std::string body(reinterpret_cast<const char*>(data + 2), size - 2);

  auto out = http::Decompress(coding, body, cap);
  if (out.ok()) {
    FUZZ_CHECK(out->size() <= cap);
    if (coding == ContentCoding::kIdentity) FUZZ_CHECK(*out == body);
  } else {
    const StatusCode code = out.status().code();
    FUZZ_CHECK(code == StatusCode::kInvalidArgument || code == StatusCode::kPayloadTooLarge);
    if (coding == ContentCoding::kIdentity) FUZZ_CHECK(code == StatusCode::kPayloadTooLarge);
  }

  // Inflating in small steps (as the HTTP service does: a budget on the I/O
  // thread, the rest on the inflate worker) ends as inflating in one go does.
  if (coding != ContentCoding::kIdentity) {
    auto inflater = http::Inflater::Start(coding, body, cap);
    FUZZ_CHECK(inflater.ok());
    const size_t budget = (size_t{data[0]} >> 2) + 1;  // 1 .. 64 bytes a step
    Result<bool> step = false;
    while (step.ok() && !*step) step = (*inflater)->Run(budget);
    FUZZ_CHECK(step.ok() == out.ok());
    if (step.ok()) {
      FUZZ_CHECK((*inflater)->TakeOutput() == *out);
    } else {
      FUZZ_CHECK(step.status().code() == out.status().code());
    }
  }

  // Round trip of the body through Compress, cap exactly at its size.
  const std::string_view whole(body);
  const size_t half = whole.size() / 2;
  const std::vector<std::string_view> parts = {whole.substr(0, half), whole.substr(half)};
  auto compressed = http::Compress(coding, parts);
  FUZZ_CHECK(compressed.ok());
  auto back = http::Decompress(coding, *compressed, body.size());
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == body);
  if (!body.empty()) {
    auto over = http::Decompress(coding, *compressed, body.size() - 1);
    FUZZ_CHECK(!over.ok() && over.status().code() == StatusCode::kPayloadTooLarge);
  }

  // Header parsers on the same bytes.
  const std::string_view header(reinterpret_cast<const char*>(data), size);
  auto parsed = http::ParseContentEncoding(header);
  if (!parsed.ok()) FUZZ_CHECK(parsed.status().code() == StatusCode::kUnsupported);
  const ContentCoding chosen = http::ChooseResponseCoding(header);
  FUZZ_CHECK(std::string_view(http::ContentCodingName(chosen)).size() > 0);
  return 0;
}
