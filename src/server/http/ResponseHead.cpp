#include "server/http/ResponseHead.h"

#include "server/http/HttpStatus.h"

namespace ortserve::http {

void AppendResponseHead(std::string* out, const HttpResponse& r, bool keep_alive, std::string_view extra_headers) {
  const auto add = [out](std::string_view name, std::string_view value) {
    out->append(name).append(": ").append(value).append("\r\n");
  };
  out->append("HTTP/1.1 ").append(std::to_string(r.status)).append(" ").append(HttpReason(r.status));
  out->append("\r\n");
  if (!r.content_type.empty()) add("Content-Type", r.content_type);
  if (r.inference_header_length) add("Inference-Header-Content-Length", std::to_string(*r.inference_header_length));
  if (!r.content_encoding.empty()) add("Content-Encoding", r.content_encoding);
  add("Content-Length", std::to_string(r.size()));
  if (r.retry_after_s) add("Retry-After", std::to_string(*r.retry_after_s));
  if (!keep_alive) add("Connection", "close");
  out->append(extra_headers).append("\r\n");
}

}  // namespace ortserve::http
