#pragma once
// A small append-only JSON writer over std::string. Integers go through
// std::to_chars, floats through WriteShortest (shortest round-trip form), so
// writing a large tensor as JSON costs one pass and no temporary strings. The caller is
// responsible for structure (commas are tracked per nesting level).
// Shared by the HTTP front end (responses), the OTLP trace exporter and the
// access log.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/Hex.h"
#include "core/Utf8.h"
#include "server/json/ShortestNumber.h"

namespace ortserve {

class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) { first_.reserve(16); }

  void StartObject() { Separator(); out_->push_back('{'); first_.push_back(true); }
  void EndObject() { out_->push_back('}'); first_.pop_back(); }
  void StartArray() { Separator(); out_->push_back('['); first_.push_back(true); }
  void EndArray() { out_->push_back(']'); first_.pop_back(); }

  // Object key; the next value call writes the value without a comma.
  void Key(std::string_view key) {
    Separator();
    AppendQuoted(key);
    out_->push_back(':');
    after_key_ = true;
  }

  void String(std::string_view s) { Separator(); AppendQuoted(s); }
  void Bool(bool b) { Separator(); out_->append(b ? "true" : "false"); }
  void Null() { Separator(); out_->append("null"); }

  template <typename T>
    requires std::is_integral_v<T>
  void Int(T v) {
    Separator();
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_->append(buf, r.ptr);
  }

  // NaN and infinities have no JSON spelling; we write NaN / Infinity /
  // -Infinity, which Python's json and python-rapidjson (what tritonclient
  // uses) read back as the same values.
  template <typename T>
    requires std::is_floating_point_v<T>
  void Float(T v) {
    Separator();
    if (std::isnan(v)) { out_->append("NaN"); return; }
    if (std::isinf(v)) { out_->append(v < 0 ? "-Infinity" : "Infinity"); return; }
    char buf[kShortestNumberMaxChars];
    out_->append(buf, WriteShortest(v, buf));
  }

  // Already-serialized JSON value.
  void Raw(std::string_view json) { Separator(); out_->append(json); }

  std::string* out() { return out_; }

  // Appends s as a JSON string literal (quotes and escapes). Well-formed
  // UTF-8 passes through unchanged; a byte that starts no well-formed
  // sequence (core/Utf8.h) is written as \ufffd, so that the output is valid
  // JSON (RFC 8259 text is UTF-8) whatever bytes `s` holds: a model name
  // from a path with %c0%ae, a request id, a message quoting either.
  static void AppendQuoted(std::string* out, std::string_view s) {
    out->push_back('"');
    size_t run = 0;  // start of the pending unescaped run
    size_t i = 0;
    while (i < s.size()) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
        ++i;
        continue;
      }
      if (c >= 0x80) {
        const size_t n = Utf8SequenceLength(s, i);
        if (n > 0) {
          i += n;
          continue;
        }
      }
      out->append(s.data() + run, i - run);
      run = ++i;
      switch (c) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        default: {
          if (c >= 0x80) {
            out->append("\\ufffd");
            break;
          }
          const char esc[6] = {'\\', 'u', '0', '0', kLowerHexDigits[c >> 4], kLowerHexDigits[c & 15]};
          out->append(esc, 6);
        }
      }
    }
    out->append(s.data() + run, s.size() - run);
    out->push_back('"');
  }

 private:
  void AppendQuoted(std::string_view s) { AppendQuoted(out_, s); }
  void Separator() {
    if (after_key_) { after_key_ = false; return; }
    if (first_.empty()) return;
    if (first_.back()) first_.back() = false;
    else out_->push_back(',');
  }

  std::string* out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace ortserve
