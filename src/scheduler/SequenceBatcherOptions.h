#pragma once
// What a sequence batcher is told (Triton's sequence_batching, translated by
// config/SequenceConfig.h): the model and its compute and queue bounds as
// for the dynamic batcher, plus the sequence policy -- the strategy, the
// slots, the idle timeout, the control inputs the server fills and the
// implicit state it feeds back. Units are in the names.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/Status.h"
#include "core/Tensor.h"
#include "scheduler/DynamicBatcherOptions.h"

namespace ortserve {

// One control input the server fills for every row of a batch.
struct ControlInput {
  enum class Kind { kStart, kEnd, kReady, kCorrelationId };
  Kind kind = Kind::kStart;
  std::string name;
  // START/END/READY: INT32, FP32 or BOOL (int32_false_true, fp32_false_true,
  // bool_false_true); CORRID: UINT64, INT64, UINT32, INT32 or BYTES.
  DataType dtype = DataType::kInt32;
  // START/END/READY: the false and true element, DataTypeSize(dtype) bytes.
  std::array<std::byte, 4> false_value{};
  std::array<std::byte, 4> true_value{};
};

// "CONTROL_SEQUENCE_START", ...: how messages name a kind.
const char* ControlKindName(ControlInput::Kind kind);

// One implicit state: the model's `output_name` of one request is its
// sequence's `input_name` in the next.
struct StateTensor {
  std::string input_name;
  std::string output_name;
  DataType dtype = DataType::kFp32;  // fixed-size
  Shape dims;                        // one sequence's, without the batch dim; all > 0
  // One sequence's initial state (bytes of dims); empty: zeros.
  TensorData initial;
};

struct SequencePolicy {
  // kDirect: a batch's row r is slot r of the instance, empty slots padded
  // with READY false. kOldest: the oldest requests of the instance's
  // candidate sequences, at most one per sequence, batched as the dynamic
  // batcher batches (BatchingPolicy).
  enum class Strategy { kDirect, kOldest };
  Strategy strategy = Strategy::kDirect;
  // Sequences one instance holds at once: direct max(1, max_batch_size),
  // oldest max_candidate_sequences.
  uint32_t slots_per_instance = 1;
  // A sequence with nothing queued or running is ended after this long.
  uint64_t max_sequence_idle_us = 1'000'000;
  // Direct: a batch waits (at most max_queue_delay_us) until this share of
  // the slots has a request; 0: it runs at once.
  float minimum_slot_utilization = 0.0f;
  // What a START for a sequence that is still running does: kRestart ends
  // the old one there and starts anew in its slot (Triton); kReject answers
  // kInvalidArgument.
  enum class RunningStart { kRestart, kReject };
  RunningStart running_start = RunningStart::kRestart;
  std::vector<ControlInput> controls;
  std::vector<StateTensor> states;

  const ControlInput* Find(ControlInput::Kind kind) const;
};

struct SequenceBatcherOptions {
  // The model, its batch dimension, the queue bound (queueing's default
  // policy, per instance) and the compute policy, as for the dynamic
  // batcher. batching.dynamic_batching, preferred sizes, max_queue_delay_us
  // and adaptive_window are the oldest strategy's; direct uses
  // max_queue_delay_us only.
  DynamicBatcherOptions batcher;
  SequencePolicy sequence;

  // kInvalidArgument naming the field and the rule it breaks.
  Status Validate() const;
  std::string Label() const { return batcher.Label(); }
};

}  // namespace ortserve
