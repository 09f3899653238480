#pragma once
// A decoded inference request and its response, independent of wire format.
//
// Contract: whoever accepts an InferenceRequest (the repository, the scheduler)
// calls `on_complete` exactly once — possibly synchronously, for a request
// rejected at once — from whatever thread finishes it. Front ends therefore
// hand the result back to their own I/O thread and never block in the callback.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/Cancellation.h"
#include "core/Status.h"
#include "core/Tensor.h"
#include "core/Trace.h"

namespace ortserve {

using Clock = std::chrono::steady_clock;

struct RequestedOutput {
  std::string name;
  // Front-end detail carried through untouched (HTTP binary_data flag).
  bool binary_data = false;
  // Triton's classification extension: when above 0, the response carries,
  // instead of the tensor, its top `classification` entries per batch row as
  // a BYTES tensor of "value:index[:label]" (serving/Classification.h).
  uint64_t classification = 0;
};

struct InferenceResponse {
  std::string model_name;
  std::string model_version;
  std::string id;
  // One per requested output, in request order (all model outputs, in config
  // order, when the request named none).
  std::vector<Tensor> outputs;
  std::vector<RequestedOutput> requested;  // parallel to outputs
  // Set by the scheduler, for access logs: this request's time in the queue,
  // its batch's compute time (input + infer + output), and that batch's rows.
  uint64_t queue_ns = 0;
  uint64_t compute_ns = 0;
  uint64_t batch_size = 0;
  // String parameters the front ends emit in the response's `parameters`
  // (e.g. "ortserve_fallback_from": the model that handed the request to the
  // fallback model named in model_name).
  std::vector<std::pair<std::string, std::string>> parameters;
};

using CompletionCallback = std::function<void(Result<InferenceResponse>)>;

// The stream of a stateful model a request belongs to: Triton's
// `sequence_id` (an unsigned integer or a string), `sequence_start` and
// `sequence_end` request parameters, as the front end decoded them.
struct SequenceParameters {
  uint64_t id = 0;        // 0: no numeric id
  std::string string_id;  // empty: no string id; at most one of the two is set
  bool start = false;
  bool end = false;
  bool has_id() const { return id != 0 || !string_id.empty(); }
};

// The response cache's key of a request (serving/ResponseCache.h): the
// serialized model version, inputs and requested outputs, and their hash.
struct ResponseCacheKey {
  uint64_t hash = 0;
  std::string bytes;        // empty: the request's answer is not cached
  uint64_t lookup_ns = 0;   // what finding out it was a miss took
  bool empty() const { return bytes.empty(); }
};

struct InferenceRequest {
  std::string model_name;
  std::string model_version;  // empty: chosen by the model's version policy
  std::string id;
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> requested_outputs;  // empty: all outputs
  // Triton's schedule-policy parameters. 0 = not given by the client.
  uint64_t timeout_us = 0;
  uint32_t priority = 0;
  SequenceParameters sequence;  // only for models with sequence batching
  Clock::time_point arrival_time = Clock::now();
  // Set by the front end when its client goes away (core/Cancellation.h):
  // a cancelled request is not computed, and its run is stopped.
  CancelFlag cancelled;  // may be null
  // Null unless the front end traces this request (core/Trace.h says who
  // writes what); shared with the front end, which emits the spans.
  std::shared_ptr<RequestTrace> trace;
  // Set by a served model whose answers are cached, when the cache had none
  // for this request: the answer is stored under it once computed.
  ResponseCacheKey cache_key;
  // Set by a served model with shape buckets (serving/ShapeBuckets.h)
  // that padded this request's inputs: their length along the bucketed dim
  // as the client sent them, to which the outputs are cropped back.
  // -1: not padded.
  int64_t unpadded_length = -1;
  CompletionCallback on_complete;
};

}  // namespace ortserve
