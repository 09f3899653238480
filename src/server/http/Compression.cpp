#include "server/http/Compression.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include "core/Text.h"

namespace ortserve::http {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}


// zlib counts in uInt; feed it in chunks no larger than that.
constexpr size_t kMaxChunk = std::numeric_limits<uInt>::max();

}  // namespace

const char* ContentCodingName(ContentCoding coding) {
  switch (coding) {
    case ContentCoding::kGzip: return "gzip";
    case ContentCoding::kDeflate: return "deflate";
    case ContentCoding::kIdentity: break;
  }
  return "identity";
}

Result<ContentCoding> ParseContentEncoding(std::string_view header) {
  header = TrimBlanks(header);
  if (header.empty() || IEquals(header, "identity")) return ContentCoding::kIdentity;
  if (IEquals(header, "gzip") || IEquals(header, "x-gzip")) return ContentCoding::kGzip;
  if (IEquals(header, "deflate")) return ContentCoding::kDeflate;
  return Status(StatusCode::kUnsupported,
                "unsupported Content-Encoding: " + std::string(header.substr(0, 64)) +
                    " (supported: gzip, deflate)");
}

ContentCoding ChooseResponseCoding(std::string_view accept) {
  bool gzip = false, deflate = false;
  while (!accept.empty()) {
    size_t comma = accept.find(',');
    std::string_view item = TrimBlanks(accept.substr(0, comma));
    accept = comma == std::string_view::npos ? std::string_view{} : accept.substr(comma + 1);
    std::string_view name = item, params;
    if (size_t semi = item.find(';'); semi != std::string_view::npos) {
      name = TrimBlanks(item.substr(0, semi));
      params = TrimBlanks(item.substr(semi + 1));
    }
    // "q=0" (or 0.0, 0.000) refuses the coding.
    bool refused = false;
    if (params.size() >= 2 && (params[0] == 'q' || params[0] == 'Q') && params[1] == '=') {
      std::string_view q = TrimBlanks(params.substr(2));
      refused = !q.empty() && q.find_first_not_of("0.") == std::string_view::npos;
    }
    if (refused) continue;
    if (IEquals(name, "gzip") || IEquals(name, "x-gzip")) gzip = true;
    else if (IEquals(name, "deflate")) deflate = true;
  }
  if (gzip) return ContentCoding::kGzip;
  if (deflate) return ContentCoding::kDeflate;
  return ContentCoding::kIdentity;
}

struct Inflater::Stream {
  z_stream zs{};
  bool initialised = false;
  // Output is inflated here, then appended: the string grows by what came,
  // never by a zero-filled guess.
  std::unique_ptr<unsigned char[]> chunk = std::make_unique_for_overwrite<unsigned char[]>(kChunkBytes);
  static constexpr size_t kChunkBytes = size_t{64} << 10;

  ~Stream() {
    if (initialised) inflateEnd(&zs);
  }
};

Inflater::Inflater(ContentCoding coding, std::string_view input, size_t max_output_bytes)
    : coding_(coding), input_left_(input), max_output_bytes_(max_output_bytes), stream_(std::make_unique<Stream>()) {}

Inflater::~Inflater() = default;

Result<std::unique_ptr<Inflater>> Inflater::Start(ContentCoding coding, std::string_view input,
                                                  size_t max_output_bytes) {
  if (coding == ContentCoding::kIdentity) return InvalidArgument("Inflater: the identity coding has nothing to inflate");
  int window_bits = 15 + 16;  // gzip
  if (coding == ContentCoding::kDeflate) {
    // HTTP "deflate" is the zlib format (RFC 1950), but some clients send raw
    // deflate (RFC 1951); a zlib header is recognisable by its checksum.
    const bool zlib_header = input.size() >= 2 && (static_cast<unsigned char>(input[0]) & 0x0f) == 8 &&
                             ((static_cast<unsigned char>(input[0]) << 8) | static_cast<unsigned char>(input[1])) % 31 == 0;
    window_bits = zlib_header ? 15 : -15;
  }
  std::unique_ptr<Inflater> inflater(new Inflater(coding, input, max_output_bytes));
  if (inflateInit2(&inflater->stream_->zs, window_bits) != Z_OK) return Internal("zlib inflateInit2 failed");
  inflater->stream_->initialised = true;
  // Room for a guessed ratio, never past the cap: reserving touches no page.
  inflater->output_.reserve(std::min(max_output_bytes, std::max<size_t>(input.size() * 4, 4096)));
  return inflater;
}

Result<bool> Inflater::Run(size_t budget_bytes) {
  z_stream& zs = stream_->zs;
  const char* name = ContentCodingName(coding_);
  size_t produced = 0;
  while (true) {
    if (zs.avail_in == 0 && !input_left_.empty()) {
      const size_t n = std::min(input_left_.size(), kMaxChunk);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input_left_.data()));
      zs.avail_in = static_cast<uInt>(n);
      input_left_.remove_prefix(n);
    }
    zs.next_out = stream_->chunk.get();
    zs.avail_out = static_cast<uInt>(Stream::kChunkBytes);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const size_t n = Stream::kChunkBytes - zs.avail_out;
    if (n > max_output_bytes_ - output_.size()) {
      return Status(StatusCode::kPayloadTooLarge, std::string("decompressed ") + name +
                                                      " request body exceeds the maximum allowed value of " +
                                                      std::to_string(max_output_bytes_) + " bytes");
    }
    output_.append(reinterpret_cast<const char*>(stream_->chunk.get()), n);
    produced += n;
    const bool input_done = zs.avail_in == 0 && input_left_.empty();
    if (rc == Z_STREAM_END) {
      // Trailing garbage after the stream is an error, not ignored data.
      if (!input_done)
        return InvalidArgument(std::string("unexpected data after the end of the ") + name +
                               " stream in the request body");
      return true;
    }
    if (rc == Z_BUF_ERROR && input_done) return InvalidArgument(std::string("truncated ") + name + " request body");
    if (rc != Z_OK && rc != Z_BUF_ERROR)
      return InvalidArgument(std::string("corrupt ") + name + " request body: " + (zs.msg ? zs.msg : "inflate error"));
    if (produced >= budget_bytes) return false;
  }
}

Result<std::string> Decompress(ContentCoding coding, std::string_view input, size_t max_output_bytes) {
  if (coding == ContentCoding::kIdentity) {
    if (input.size() > max_output_bytes)
      return Status(StatusCode::kPayloadTooLarge, "request body of " + std::to_string(input.size()) +
                                                      " bytes exceeds the maximum allowed value of " +
                                                      std::to_string(max_output_bytes) + " bytes");
    return std::string(input);
  }
  auto inflater = Inflater::Start(coding, input, max_output_bytes);
  if (!inflater.ok()) return inflater.status();
  auto done = (*inflater)->Run(std::numeric_limits<size_t>::max());
  if (!done.ok()) return done.status();
  return (*inflater)->TakeOutput();
}

Result<std::string> Compress(ContentCoding coding, const std::vector<std::string_view>& parts) {
  size_t total = 0;
  for (auto p : parts) total += p.size();
  if (coding == ContentCoding::kIdentity) {
    std::string out;
    out.reserve(total);
    for (auto p : parts) out.append(p);
    return out;
  }
  z_stream zs{};
  // Level 1: most of the win for tensors at a fraction of the CPU.
  const int window_bits = coding == ContentCoding::kGzip ? 15 + 16 : 15;
  if (deflateInit2(&zs, 1, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return Internal("zlib deflateInit2 failed");
  struct Guard { z_stream* z; ~Guard() { deflateEnd(z); } } guard{&zs};

  std::string out;
  out.resize(std::min<uLong>(deflateBound(&zs, static_cast<uLong>(std::min(total, kMaxChunk))), kMaxChunk) + 64);
  size_t produced = 0;
  for (size_t i = 0; i <= parts.size(); ++i) {
    const bool last = i == parts.size();
    std::string_view p = last ? std::string_view{} : parts[i];
    size_t offset = 0;
    do {
      const size_t n = std::min(p.size() - offset, kMaxChunk);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p.data() + offset));
      zs.avail_in = static_cast<uInt>(n);
      offset += n;
      const int flush = last ? Z_FINISH : Z_NO_FLUSH;
      int rc;
      do {
        if (produced == out.size()) out.resize(out.size() * 2);
        const size_t room = std::min(out.size() - produced, kMaxChunk);
        zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
        zs.avail_out = static_cast<uInt>(room);
        rc = deflate(&zs, flush);
        produced += room - zs.avail_out;
        if (rc == Z_STREAM_ERROR) return Internal("zlib deflate failed");
      } while (zs.avail_out == 0 || (last && rc != Z_STREAM_END));
    } while (offset < p.size());
  }
  out.resize(produced);
  return out;
}

}  // namespace ortserve::http
