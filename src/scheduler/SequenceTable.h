#pragma once
// Which sequence holds which slot, and the rules a sequence's requests
// follow. A slot is one instance's place for one sequence at a time; every
// request of a sequence goes to its slot, so it runs on that instance, in
// arrival order, against that slot's state.
//
// A sequence's slot, step by step:
//   free -> a START takes the free slot with the lowest index (instances
//   taking turns), its id routes there (live);
//   -> a request with END is accepted: the id stops routing (a later request
//   without START is refused), the slot stays taken until what is queued
//   for it has run;
//   -> or it ends early: idle for max_sequence_idle (nothing queued or
//   running), or one of its requests failed, timed out or was cancelled (its
//   state is then undefined, so its queued requests are answered with the
//   reason);
//   -> free again, its state released.
// Ended ids are remembered (the last kRemembered) so that a late request is
// told why its sequence is gone.
//
// The rules, each refused with a message naming the sequence and the rule
// (Triton's words first where its clients and QA tests match them):
//   no sequence_id              kInvalidArgument "inference request to model
//                               'x' must specify a non-zero or non-empty
//                               correlation ID..."
//   no START, id not running    kInvalidArgument "inference request for
//                               sequence 7 to model 'x' must specify the
//                               START flag on the first request of the
//                               sequence: <why: never started / ended /
//                               idle / failed>"
//   START, id running           restarts it in its slot (Triton), or
//                               kInvalidArgument under RunningStart::kReject
//   START, no free slot         kUnavailable naming the slots and the field
//                               that sets them
//
// Not thread-safe: the sequence batcher calls it under its lock.
#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/ModelStatistics.h"
#include "core/Status.h"
#include "scheduler/SequenceBatcherOptions.h"

namespace ortserve {

// A sequence's id: Triton's sequence_id, a number or a string.
struct SequenceKey {
  uint64_t id = 0;
  std::string string_id;
  static SequenceKey Of(const SequenceParameters& p) { return {p.id, p.string_id}; }
  std::string ToString() const { return string_id.empty() ? std::to_string(id) : string_id; }
  bool operator==(const SequenceKey& other) const { return id == other.id && string_id == other.string_id; }
};
struct SequenceKeyHash {
  size_t operator()(const SequenceKey& k) const {
    return std::hash<uint64_t>()(k.id) ^ (std::hash<std::string>()(k.string_id) << 1);
  }
};

struct SlotRef {
  uint32_t instance = 0;
  uint32_t slot = 0;
  bool operator==(const SlotRef& o) const { return instance == o.instance && slot == o.slot; }
};

class SequenceTable {
 public:
  static constexpr size_t kRemembered = 4096;

  // Where a request goes: its sequence's slot; `opens`: it starts a sequence
  // in a free slot; `restarts`: a START for a running sequence.
  struct Route {
    SlotRef where;
    bool opens = false;
    bool restarts = false;
  };

  // `describe_slots` says how the slot count came about, for the message of
  // a START that finds none free ("2 instance(s) x max_candidate_sequences
  // 8"). `stats` must outlive the table.
  SequenceTable(std::string model_name, uint32_t instances, uint32_t slots_per_instance,
                SequencePolicy::RunningStart running_start, uint64_t max_idle_us, std::string describe_slots,
                SequenceStats* stats);

  // The route of `request`, or why the rules refuse it. Changes nothing.
  Result<Route> Find(const InferenceRequest& request) const;
  // A request of `sequence` was queued along `route`: the slot is taken
  // (opens), its idle clock stopped, and an END retires the id.
  void Accept(const Route& route, const SequenceParameters& sequence);

  // A request of the slot left the queue: into a batch, or answered there.
  void Dequeued(SlotRef slot, bool into_batch);
  // The slot's running request is done (`now`); true when the slot is free
  // now (its sequence had ended and nothing more is queued for it).
  bool RunEnded(SlotRef slot, Clock::time_point now);
  // Ends the slot's sequence early (a failed request; shutdown): its id is
  // retired with `detail` (why, for later requests of the id); true when the
  // slot is free now. Does nothing if the sequence had ended already.
  bool EndEarly(SlotRef slot, SequenceEnd reason, const std::string& detail);
  // Ends the sequences of `instance` idle for max_idle at `now` and frees
  // their slots (appended to `freed`); returns when the next may expire
  // (max: none idle).
  Clock::time_point ExpireIdle(uint32_t instance, Clock::time_point now, std::vector<uint32_t>* freed);

  // Shutdown: every sequence still open is ended (SequenceEnd::kShutdown)
  // and every slot freed.
  void DropAll();

  // The sequence the slot holds or held last (for CORRID and messages).
  const SequenceKey& KeyOf(SlotRef slot) const { return At(slot).key; }
  // Whether the slot's sequence still routes (not ended).
  bool Live(SlotRef slot) const { return At(slot).live; }
  uint32_t slots_total() const { return static_cast<uint32_t>(slots_.size()) * slots_per_instance_; }
  size_t active() const { return occupied_; }
  // The live sequences (shutdown: they are all dropped).
  size_t live() const { return live_.size(); }

  // "inference request for sequence 7 to model 'x'": how messages begin.
  std::string Prefix(const SequenceKey& key) const;

 private:
  struct Slot {
    bool occupied = false;
    bool live = false;  // `key` routes here
    SequenceKey key;
    uint32_t queued = 0;
    bool running = false;
    Clock::time_point idle_since{};  // while occupied with nothing queued or running
  };
  struct Retired {
    SequenceEnd reason;
    std::string detail;
    uint64_t serial;  // which listing in retired_order_ is this one's
  };

  Slot& At(SlotRef r) { return slots_[r.instance][r.slot]; }
  const Slot& At(SlotRef r) const { return slots_[r.instance][r.slot]; }
  Status NotRunning(const SequenceKey& key) const;
  void Retire(const SequenceKey& key, SequenceEnd reason, std::string detail);
  // Frees the slot if its sequence ended and nothing is queued or running.
  bool FreeIfDone(SlotRef slot);
  void MarkIdle(SlotRef slot, Clock::time_point now);
  void UnmarkIdle(SlotRef slot);

  const std::string model_name_;
  const uint32_t slots_per_instance_;
  const SequencePolicy::RunningStart running_start_;
  const Clock::duration max_idle_;
  const std::string describe_slots_;
  SequenceStats* const stats_;
  std::vector<std::vector<Slot>> slots_;                           // [instance][slot]
  std::set<std::pair<uint32_t, uint32_t>> free_;                   // (slot, instance): lowest slot first
  std::vector<std::set<std::pair<Clock::time_point, uint32_t>>> idle_;  // per instance: (since, slot)
  std::unordered_map<SequenceKey, SlotRef, SequenceKeyHash> live_;
  std::unordered_map<SequenceKey, Retired, SequenceKeyHash> retired_;
  std::deque<std::pair<SequenceKey, uint64_t>> retired_order_;  // (key, serial), oldest first
  uint64_t retired_serial_ = 0;
  size_t occupied_ = 0;
};

}  // namespace ortserve
