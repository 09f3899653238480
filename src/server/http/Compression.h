#pragma once
// HTTP content codings with zlib: request bodies are inflated with a running
// cap (a gzip bomb stops at max_output_bytes, it is never fully expanded), and
// responses are compressed when Accept-Encoding asks for it.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"

namespace ortserve::http {

enum class ContentCoding { kIdentity, kGzip, kDeflate };

// Parses a Content-Encoding header value. Empty / "identity" → kIdentity;
// "gzip", "x-gzip", "deflate" (any case); anything else → kUnsupported
// ("unsupported Content-Encoding: br").
Result<ContentCoding> ParseContentEncoding(std::string_view header);

// Picks a response coding from an Accept-Encoding header: gzip, then deflate,
// among codings listed with q > 0; kIdentity when neither is acceptable.
ContentCoding ChooseResponseCoding(std::string_view accept_encoding);

const char* ContentCodingName(ContentCoding coding);  // "gzip", "deflate", "identity"

// Inflates a request body a bounded amount at a time, so that a caller can
// do a small part on one thread and hand the rest to another. Output goes
// into a string grown as it comes (never a zero-filled guess of the final
// size), and the limit is checked as it streams: a gzip bomb stops at
// max_output_bytes, it is never expanded past it.
class Inflater {
 public:
  // `input` must outlive the inflater. kInvalidArgument for kIdentity.
  static Result<std::unique_ptr<Inflater>> Start(ContentCoding coding, std::string_view input,
                                                 size_t max_output_bytes);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Inflates until the stream ends (true) or at least `budget_bytes` more
  // output was produced (false: call again). Output beyond max_output_bytes
  // → kPayloadTooLarge naming the limit; corrupt or truncated input, or data
  // after the end of the stream → kInvalidArgument.
  Result<bool> Run(size_t budget_bytes);
  // The output so far (all of it once Run returned true).
  std::string TakeOutput() { return std::move(output_); }

 private:
  struct Stream;
  Inflater(ContentCoding coding, std::string_view input, size_t max_output_bytes);

  ContentCoding coding_;
  std::string_view input_left_;
  size_t max_output_bytes_;
  std::unique_ptr<Stream> stream_;
  std::string output_;
};

// Inflates `input` (gzip, or zlib-wrapped / raw deflate for kDeflate) in one
// go; kIdentity copies it. Errors as Inflater::Run (kIdentity over
// max_output_bytes: kPayloadTooLarge too).
Result<std::string> Decompress(ContentCoding coding, std::string_view input, size_t max_output_bytes);

// Compresses the concatenation of `parts` (so a JSON header and the tensors
// that follow it are compressed without first being joined).
Result<std::string> Compress(ContentCoding coding, const std::vector<std::string_view>& parts);

}  // namespace ortserve::http
