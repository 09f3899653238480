#include "server/http/RequestParser.h"

#include <algorithm>
#include <charconv>
#include <boost/beast/http/error.hpp>

namespace ortserve::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

RequestParser::RequestParser(const RequestLimits& limits) : limits_(limits) {
  count_chunk_ = [this](std::uint64_t size, beast::string_view, beast::error_code& ec) {
    // Size 0 is the last chunk, which ends the body.
    if (size > 0 && ++body_chunks_ > limits_.max_body_chunks) ec = bhttp::error::body_limit;
  };
  parser_.header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits_.max_header_bytes, UINT32_MAX)));
  parser_.body_limit(limits_.max_body_bytes);
  parser_.on_chunk_header(count_chunk_);
}

beast::error_code RequestParser::ParseBuffered(beast::flat_buffer& buffer) {
  beast::error_code ec;
  while (buffer.size() > 0 && !parser_.is_done()) {
    const size_t used = parser_.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == bhttp::error::need_more) return {};
    if (ec || used == 0) return ec;
  }
  return ec;
}

std::string RequestParser::BodyOverLimitMessage() const {
  const std::string limit = std::to_string(limits_.max_body_bytes) + " bytes";
  const std::string hint = ". Use --http-max-input-size to increase the limit.";
  const auto length = parser_.content_length();
  const std::string size = length ? std::to_string(*length) + " bytes" : "more than " + limit;
  const auto& fields = parser_.get();
  const auto header_field = fields.find("Inference-Header-Content-Length");
  // Only an infer request has binary tensors after a JSON header; any other
  // body (generate, repository calls) is JSON whole.
  const std::string_view target(fields.target().data(), fields.target().size());
  const bool infer = target.size() >= 6 && target.substr(target.size() - 6) == "/infer";
  if (header_field == fields.end() || !infer) {
    return "request JSON size of " + size + " exceeds the maximum allowed input size of " + limit + hint;
  }
  const std::string_view header(header_field->value().data(), header_field->value().size());
  if (header == "0") {
    return "Raw input has a byte_size (" + size + ") that exceeds the maximum allowed value of " + limit + hint;
  }
  // Binary tensors after a JSON header: Triton names the header when it is
  // itself over the limit.
  uint64_t header_bytes = 0;
  const auto [end, ec] = std::from_chars(header.data(), header.data() + header.size(), header_bytes);
  if (ec == std::errc() && end == header.data() + header.size() && header_bytes > limits_.max_body_bytes) {
    return "request JSON size of " + std::string(header) + " bytes exceeds the maximum allowed input size of " +
           limit + hint;
  }
  return "request size of " + size + " exceeds the maximum allowed input size of " + limit + hint;
}

std::optional<ParseErrorAnswer> RequestParser::AnswerFor(beast::error_code ec) const {
  if (body_chunks_ > limits_.max_body_chunks) {
    return ParseErrorAnswer{400, "Chunked request body exceeds maximum of " + std::to_string(limits_.max_body_chunks) +
                                     " non-empty chunks. Send fewer or larger HTTP chunks. (--http-max-body-chunks)"};
  }
  if (ec == bhttp::error::body_limit) return ParseErrorAnswer{400, BodyOverLimitMessage()};
  if (ec == bhttp::error::header_limit) {
    return ParseErrorAnswer{431, "request headers exceed the limit of " + std::to_string(limits_.max_header_bytes) +
                                     " bytes (--http-max-header-size)"};
  }
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    return ParseErrorAnswer{400, "malformed HTTP request: " + ec.message()};
  }
  return std::nullopt;
}

}  // namespace ortserve::http
