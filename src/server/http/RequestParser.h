#pragma once
// One HTTP/1.1 request as the server reads it: Beast's parser with the
// server's limits (header bytes, body bytes, chunks of a chunked body) and
// the answer each parse error gets. HttpServer's sessions read with it; the
// fuzz target tests/fuzz/http_request_fuzz.cpp feeds it bytes the same way.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ortserve::http {

// The server's values come from HttpServerOptions (whose defaults are the
// flags' defaults).
struct RequestLimits {
  size_t max_header_bytes;  // request line + headers (→ 431)
  size_t max_body_bytes;    // after de-chunking (→ 400, as Triton)
  size_t max_body_chunks;   // chunked bodies (→ 400, as Triton)
};

// What to answer a request that could not be read.
struct ParseErrorAnswer {
  unsigned status;      // 400 or 431
  std::string message;  // names the limit's flag where a limit was hit
};

class RequestParser {
 public:
  using BeastParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  explicit RequestParser(const RequestLimits& limits);
  // The Beast parser holds a reference to this object's chunk counter.
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  BeastParser& beast() { return parser_; }

  // Parses as much of `buffer` as it can, consuming what it used. An error
  // other than "need more" is returned (then see AnswerFor); otherwise the
  // request may be done, have its header done, or need more bytes.
  boost::beast::error_code ParseBuffered(boost::beast::flat_buffer& buffer);

  // The answer for a read or parse error, or nullopt for errors nobody can
  // be answered for (end of stream, a reset, a timeout, a cancelled read).
  std::optional<ParseErrorAnswer> AnswerFor(boost::beast::error_code ec) const;

  size_t body_chunks() const { return body_chunks_; }

 private:
  // Triton's words for a body over max_body_bytes, which depend on the kind
  // of request its headers announce (JSON, binary tensors, raw binary).
  std::string BodyOverLimitMessage() const;

  RequestLimits limits_;
  size_t body_chunks_ = 0;
  std::function<void(std::uint64_t, boost::beast::string_view, boost::beast::error_code&)> count_chunk_;
  BeastParser parser_;
};

}  // namespace ortserve::http
