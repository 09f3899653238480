#include "server/http/HttpStatus.h"

namespace ortserve::http {

unsigned HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kUnsupported: return 501;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kCancelled: return 499;
    // As Triton: a body or tensor over a limit is a bad request (400), not
    // 413; its clients and QA tests read the status.
    case StatusCode::kPayloadTooLarge: return 400;
    case StatusCode::kInternal: return 500;
  }
  return 500;
}

const char* HttpReason(unsigned status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
  }
  return "";
}

}  // namespace ortserve::http
