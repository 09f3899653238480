#pragma once
// HTTP content codings with zlib: request bodies are inflated with a running
// cap (a gzip bomb stops at max_output_bytes, it is never fully expanded), and
// responses are compressed when Accept-Encoding asks for it.
#include <cstddef>
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

// Inflates `input` (gzip, or zlib-wrapped / raw deflate for kDeflate). Output
// beyond max_output_bytes → kPayloadTooLarge naming the limit; corrupt or
// truncated input → kInvalidArgument.
Result<std::string> Decompress(ContentCoding coding, std::string_view input, size_t max_output_bytes);

// Compresses the concatenation of `parts` (so a JSON header and the tensors
// that follow it are compressed without first being joined).
Result<std::string> Compress(ContentCoding coding, const std::vector<std::string_view>& parts);

}  // namespace ortserve::http
