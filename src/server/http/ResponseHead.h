#pragma once
// The status line and headers of an HTTP response, written here rather than
// by Beast's serializer: the header set is small and fixed, and the
// serializer's buffer-sequence machinery was a visible part of the CPU a
// small request costs. Internal to src/server/http.
#include <string>
#include <string_view>

#include "server/http/HttpService.h"

namespace ortserve::http {

// Appends the head of `r` to `out` (a buffer reused across a connection's
// responses); `extra_headers` are whole "Name: value\r\n" lines.
void AppendResponseHead(std::string* out, const HttpResponse& r, bool keep_alive,
                        std::string_view extra_headers = {});

}  // namespace ortserve::http
