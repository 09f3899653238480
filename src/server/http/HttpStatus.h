#pragma once
// The one place where a Status becomes an HTTP status code.
//
//   kInvalidArgument  400   bad request content
//   kNotFound         404   unknown model/version (as Triton's
//                           HttpCodeFromError for TRITONSERVER_ERROR_NOT_FOUND)
//   kUnavailable      503   overload, model not ready, shutting down
//   kUnsupported      501   unsupported Content-Encoding / feature
//   kPayloadTooLarge  400   body or decoded body over max_input_size (as Triton)
//   kDeadlineExceeded 504   the request's `timeout` expired before it ran
//                           (Triton reports this as a 400 with "timeout" in the
//                           message; 504 lets load balancers and clients retry
//                           on a status without parsing text — any non-200 is
//                           an error for tritonclient/perf_analyzer)
//   kCancelled        499   client went away; never actually written because
//                           the connection is gone, kept for logs
//   kInternal         500
#include "core/Status.h"

namespace ortserve::http {

unsigned HttpStatusFor(StatusCode code);
const char* HttpReason(unsigned status);

}  // namespace ortserve::http
