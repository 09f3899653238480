// Fuzz target: HTTP/1.1 request framing as the server reads it
// (server/http/RequestParser: Beast's parser with the header, body and
// chunk-count limits, and the answer each parse error gets), then the path
// parsing every request goes through (SplitPath, HttpApiGroup).
//
// Input layout: byte 0 = how the bytes arrive: 0 all at once, n > 0 in reads
// of n bytes (the parser sees every split a socket could produce); the rest
// is what a client sends on one connection, up to 8 pipelined requests.
// Limits are small so that they are reached: 1024 header bytes, 2048 body
// bytes, 4 chunks.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "FuzzCommon.h"
#include "server/http/HttpService.h"
#include "server/http/RequestParser.h"

using namespace ortserve;

namespace {

constexpr http::RequestLimits kLimits{.max_header_bytes = 1024, .max_body_bytes = 2048, .max_body_chunks = 4};

// A parse error: either nobody is answered, or a 4xx whose message names the
// limit that was hit.
void CheckAnswer(const http::RequestParser& request, boost::beast::error_code ec) {
  const auto answer = request.AnswerFor(ec);
  if (!answer) return;
  FUZZ_CHECK(answer->status == 400 || answer->status == 431);
  FUZZ_CHECK(!answer->message.empty());
  if (answer->status == 431) FUZZ_CHECK(answer->message.find("--http-max-header-size") != std::string::npos);
  if (request.body_chunks() > kLimits.max_body_chunks) {
    FUZZ_CHECK(answer->message.find("--http-max-body-chunks") != std::string::npos);
  }
}

// A request read completely kept the limits; its path parses or is refused.
void CheckRequest(const http::RequestParser& request, http::RequestParser::BeastParser& parser) {
  FUZZ_CHECK(request.body_chunks() <= kLimits.max_body_chunks);
  const auto& req = parser.get();
  FUZZ_CHECK(req.body().size() <= kLimits.max_body_bytes);
  const std::string_view target(req.target().data(), req.target().size());
  if (auto path = http::SplitPath(target)) (void)http::HttpApiGroup(*path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = data[0];
  std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);

  boost::beast::flat_buffer buffer;
  for (int requests = 0; requests < 8; ++requests) {
    http::RequestParser request(kLimits);
    auto& parser = request.beast();
    boost::beast::error_code ec;
    // Feed the bytes as reads of `piece` bytes would deliver them, parsing
    // after each read as the server does.
    while (!ec && !parser.is_done()) {
      ec = request.ParseBuffered(buffer);
      if (ec || parser.is_done()) break;
      if (wire.empty()) {
        ec = boost::beast::http::error::partial_message;  // the client stopped sending
        break;
      }
      const size_t n = piece == 0 ? wire.size() : std::min(piece, wire.size());
      const auto dest = buffer.prepare(n);
      std::memcpy(dest.data(), wire.data(), n);
      buffer.commit(n);
      wire.remove_prefix(n);
    }
    if (ec) {
      CheckAnswer(request, ec);
      return 0;  // the server answers (or not) and closes the connection
    }
    CheckRequest(request, parser);
    if (!parser.get().keep_alive()) return 0;
  }
  return 0;
}
