#pragma once
// UTF-8 well-formedness (RFC 3629), for text that came from a client and goes
// into JSON or a log line: model names from percent-escaped paths, request
// ids, messages that quote them. What is not UTF-8 is replaced, so that every
// JSON document and log line the server writes is valid UTF-8.
#include <cstddef>
#include <string>
#include <string_view>

namespace ortserve {

// U+FFFD REPLACEMENT CHARACTER in UTF-8: what stands in for a byte that
// starts no well-formed sequence.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

// The length (1 to 4) of the well-formed UTF-8 sequence that starts at s[i],
// or 0 when the bytes there are not one: a stray continuation byte, a
// truncated sequence, an overlong form (C0 AE for '.'), a surrogate
// (ED A0..BF) or a code point above U+10FFFF. i < s.size().
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong below U+0800
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong below U+10000
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // 80..C1 (continuation, overlong 2-byte lead), F5..FF
  }
  if (s.size() - i < length) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return length;
}

// Appends `s` to `out` with every byte that starts no well-formed sequence
// replaced by U+FFFD; well-formed text is appended as it is.
inline void AppendValidUtf8(std::string* out, std::string_view s) {
  size_t run = 0;  // start of the pending well-formed run
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(s, i);
    if (n > 0) {
      i += n;
      continue;
    }
    out->append(s.data() + run, i - run);
    out->append(kUtf8Replacement);
    run = ++i;
  }
  out->append(s.data() + run, s.size() - run);
}

// Whether all of `s` is well-formed UTF-8.
inline bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace ortserve
