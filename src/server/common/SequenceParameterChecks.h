#pragma once
// The rules both front ends apply to Triton's correlation parameters once
// each one's wire type is decoded (HTTP: server/http/RequestParameters.cpp;
// gRPC: server/grpc/GrpcInferCodec.cpp). Whether a model takes sequences,
// and whether a sequence is known, is the served model's and its
// scheduler's to say, not the front end's.
#include <cstddef>

#include "core/InferenceRequest.h"
#include "core/Status.h"

namespace ortserve::common {

// Triton's limit on a string sequence id
// (TRITONSERVER_InferenceRequestSetCorrelationIdString).
inline constexpr size_t kMaxStringSequenceIdLength = 128;

// kInvalidArgument, naming the parameter, when a string `sequence_id` is
// longer than kMaxStringSequenceIdLength, or when `sequence_start` or
// `sequence_end` is true without a sequence id (none, 0 or ""): such a flag
// would otherwise be dropped without a word, or start a sequence no later
// request can name. False flags without an id are what a stateless request
// may carry, and pass.
Status CheckSequenceParameters(const SequenceParameters& sequence);

}  // namespace ortserve::common
