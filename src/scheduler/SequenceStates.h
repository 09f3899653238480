#pragma once
// Implicit state (Triton's sequence_batching.state) of one instance's
// sequence slots, kept in the server: after each successful run the slot's
// state outputs are copied into buffers the slot owns, and its next request
// gets them back as the state inputs; a request with START (and a padding
// row) gets the initial state instead -- zeros, or the config's
// initial_state. The copy is the slot's own, so a state never pins a whole
// batch's output buffer and the bytes held are exact; each slot keeps a
// spare buffer per state, reused once the request that read the last state
// is gone, so a steady sequence allocates nothing.
//
// Ownership and threads: one per instance, touched only by that instance's
// worker (which alone runs and ends its slots' sequences). The bytes held
// are added to / subtracted from `bytes_held` (the model's statistics) as
// slots keep and release state.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/Status.h"
#include "core/Tensor.h"
#include "scheduler/SequenceBatcherOptions.h"

namespace ortserve {

class SequenceStates {
 public:
  // `batching`: the model has a batch dimension (a row is [1] + dims).
  // `bytes_held` must outlive this.
  SequenceStates(const SequencePolicy& policy, bool batching, uint32_t slots, std::atomic<uint64_t>* bytes_held);
  ~SequenceStates();  // releases every slot
  SequenceStates(const SequenceStates&) = delete;
  SequenceStates& operator=(const SequenceStates&) = delete;
  SequenceStates(SequenceStates&&) = delete;

  bool empty() const { return specs_.empty(); }  // the model has no implicit state

  // Appends slot's state inputs, one row each: the state it keeps, or the
  // initial state when `start` or when it keeps none.
  void Append(uint32_t slot, bool start, std::vector<Tensor>* inputs) const;
  // Appends the initial state, one row: for a padding row.
  void AppendInitial(std::vector<Tensor>* inputs) const;
  // Keeps the state outputs among `outputs` (one request's, named) as the
  // slot's state. kInternal naming the output when one is missing or does
  // not have the state's shape; the slot then keeps nothing.
  Status Keep(uint32_t slot, const std::vector<Tensor>& outputs);
  // The slot's sequence ended: its state is freed.
  void Release(uint32_t slot);
  // Every slot's (shutdown).
  void ReleaseAll();


 private:
  struct Spec {
    StateTensor tensor;
    Shape row_shape;  // [1] + dims, or dims
    size_t bytes;     // one row
    TensorData initial;
  };
  using Buffer = std::shared_ptr<std::vector<std::byte>>;
  struct Held {
    bool valid = false;
    std::vector<Buffer> current;  // one per spec
    std::vector<Buffer> spare;
  };

  Tensor RowTensor(const Spec& spec, const TensorData& data) const;
  Status CopyOut(const Spec& spec, const std::vector<Tensor>& outputs, Buffer* into) const;

  std::vector<Spec> specs_;
  uint64_t bytes_per_slot_ = 0;
  std::vector<Held> held_;  // one per slot
  std::atomic<uint64_t>* const bytes_held_;
};

// Every state input with `rows` rows of its initial state at once ([rows] +
// dims; dims alone without a batch dim, rows 1): warm-up's batches.
std::vector<Tensor> InitialStateRows(const SequencePolicy& policy, bool batching, uint64_t rows);

}  // namespace ortserve
