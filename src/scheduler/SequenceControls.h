#pragma once
// The control inputs a sequence model gets from the server (Triton's
// CONTROL_SEQUENCE_START / _END / _READY / _CORRID), one row per request of a
// batch: START and END from the request's sequence_start / sequence_end,
// READY true for a request and false for a padding row (direct strategy),
// CORRID the request's sequence_id in the configured data type (0 or "" for
// padding). Each row's tensor is [1, 1] for a model with a batch dimension
// (the batch stacks them to [rows, 1]) and [1] without, as Triton feeds
// them. The boolean rows are built once and shared, so a request costs no
// allocation for them; CORRID costs one small buffer per request.
//
// Immutable after construction; thread-safe.
#include <cstdint>
#include <string>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "scheduler/SequenceBatcherOptions.h"

namespace ortserve {

class SequenceControls {
 public:
  struct Flags {
    bool start = false;
    bool end = false;
    bool ready = true;
  };

  // `batching`: the model has a batch dimension.
  SequenceControls(const SequencePolicy& policy, bool batching);

  // Appends one row of every control input to `inputs`; `id` fills CORRID
  // (it must have passed CheckCorrelationId; ignored for padding, !ready).
  void Append(Flags flags, const SequenceParameters& id, std::vector<Tensor>* inputs) const;

  // Every control input for `rows` rows at once with the same flags and a
  // CORRID of 0 (or ""): warm-up's batches.
  std::vector<Tensor> ForRows(Flags flags, uint64_t rows) const;

  // Whether `id` fits the CORRID input's data type: a string id needs BYTES,
  // a numeric one an integer type. kInvalidArgument in Triton's words
  // ("sequence batching control 'CORRID' data-type is 'BYTES', but model 'x'
  // expects 'UINT64'") otherwise; OK when the model has no CORRID input.
  Status CheckCorrelationId(const SequenceParameters& id, const std::string& model_name) const;

 private:
  struct Boolean {
    ControlInput::Kind kind;
    Tensor false_row;
    Tensor true_row;
  };

  Tensor CorrelationRow(const SequenceParameters& id, bool ready) const;
  // [rows, 1] (or [rows] without a batch dim) named after `like`, `rows`
  // copies of `element`.
  Tensor Repeat(const Tensor& like, const std::byte* element, size_t element_size, uint64_t rows) const;

  const bool batching_;
  std::vector<Boolean> booleans_;
  bool has_correlation_id_ = false;
  std::string correlation_name_;
  DataType correlation_dtype_ = DataType::kUint64;
};

}  // namespace ortserve
