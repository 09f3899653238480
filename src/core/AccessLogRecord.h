#pragma once
// One completed inference request as a front end saw it, for the optional
// access log. The views are valid only during the sink call.
#include <cstdint>
#include <functional>
#include <string_view>

#include "core/InferenceRequest.h"

namespace ortserve {

struct AccessLogRecord {
  // "http", "grpc" (ModelInfer) or "grpc-stream" (one ModelStreamInfer
  // response: each request on a stream is logged like a unary call).
  std::string_view protocol;
  std::string_view request_id;  // the client's id; may be empty
  std::string_view model;
  std::string_view version;     // the version that answered, else the one asked for
  int status_code = 0;          // HTTP status, or the gRPC status code
  // From the scheduler (InferenceResponse); 0 when the request never ran.
  uint64_t queue_ns = 0;
  uint64_t compute_ns = 0;
  uint64_t batch_size = 0;
  uint64_t bytes_in = 0;   // request body/message as received
  uint64_t bytes_out = 0;  // response body/message as sent
  // A traced request's ids in hex (the request span's); empty: not traced.
  std::string_view trace_id;
  std::string_view span_id;

  // Takes what the scheduler measured for a request that ran: the version
  // that answered, queue and compute time, batch size.
  void SetResponse(const InferenceResponse& response) {
    version = response.model_version;
    queue_ns = response.queue_ns;
    compute_ns = response.compute_ns;
    batch_size = response.batch_size;
  }
};

// Called on the front end's I/O thread once per completed infer request; must
// not block for long. Empty: no access log.
using AccessLogSink = std::function<void(const AccessLogRecord&)>;

}  // namespace ortserve
