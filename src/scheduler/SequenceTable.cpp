#include "scheduler/SequenceTable.h"

#include <algorithm>
#include <chrono>

namespace ortserve {

SequenceTable::SequenceTable(std::string model_name, uint32_t instances, uint32_t slots_per_instance,
                             SequencePolicy::RunningStart running_start, uint64_t max_idle_us,
                             std::string describe_slots, SequenceStats* stats)
    : model_name_(std::move(model_name)),
      slots_per_instance_(slots_per_instance),
      running_start_(running_start),
      // Capped at a day so that idle_since + max_idle cannot overflow.
      max_idle_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::microseconds(std::min<uint64_t>(max_idle_us, 86'400'000'000ULL)))),
      describe_slots_(std::move(describe_slots)),
      stats_(stats),
      slots_(instances, std::vector<Slot>(slots_per_instance)),
      idle_(instances) {
  for (uint32_t s = 0; s < slots_per_instance; ++s)
    for (uint32_t i = 0; i < instances; ++i) free_.insert({s, i});
  stats_->slots.store(slots_total(), std::memory_order_relaxed);
}

std::string SequenceTable::Prefix(const SequenceKey& key) const {
  return "inference request for sequence " + key.ToString() + " to model '" + model_name_ + "'";
}

Status SequenceTable::NotRunning(const SequenceKey& key) const {
  auto it = retired_.find(key);
  const std::string why = it != retired_.end()
                              ? it->second.detail
                              : "no sequence " + key.ToString() + " is running (it never started, or it ended long ago)";
  return InvalidArgument(Prefix(key) + " must specify the START flag on the first request of the sequence: " + why);
}

Result<SequenceTable::Route> SequenceTable::Find(const InferenceRequest& request) const {
  const SequenceParameters& p = request.sequence;
  if (!p.has_id()) {
    return InvalidArgument("inference request to model '" + model_name_ +
                           "' must specify a non-zero or non-empty correlation ID: the model is stateful "
                           "(sequence_batching), so every request needs the sequence_id parameter, and a "
                           "sequence's first request sequence_start");
  }
  const SequenceKey key = SequenceKey::Of(p);
  if (auto it = live_.find(key); it != live_.end()) {
    if (!p.start) return Route{it->second};
    if (running_start_ == SequencePolicy::RunningStart::kReject) {
      return InvalidArgument(Prefix(key) + " has the START flag, but sequence " + key.ToString() +
                             " is still running (the model refuses restarts, parameter sequence_restart): end it "
                             "with sequence_end first, or start another sequence_id");
    }
    return Route{it->second, /*opens=*/false, /*restarts=*/true};
  }
  if (!p.start) return NotRunning(key);
  if (free_.empty()) {
    return Unavailable(Prefix(key) + " cannot start: all " + std::to_string(slots_total()) + " sequence slots (" +
                       describe_slots_ + ") hold running sequences; retry once one ends");
  }
  const auto [slot, instance] = *free_.begin();
  return Route{{instance, slot}, /*opens=*/true, /*restarts=*/false};
}

void SequenceTable::Accept(const Route& route, const SequenceParameters& sequence) {
  Slot& s = At(route.where);
  const SequenceKey key = SequenceKey::Of(sequence);
  if (route.opens) {
    free_.erase({route.where.slot, route.where.instance});
    s = Slot{};
    s.occupied = true;
    s.live = true;
    s.key = key;
    live_[key] = route.where;
    retired_.erase(key);
    ++occupied_;
    stats_->active.store(occupied_, std::memory_order_relaxed);
    stats_->started.fetch_add(1, std::memory_order_relaxed);
  } else {
    if (route.restarts) {
      stats_->CountEnd(SequenceEnd::kRestarted);
      stats_->started.fetch_add(1, std::memory_order_relaxed);
    }
    UnmarkIdle(route.where);
  }
  ++s.queued;
  if (sequence.end) {
    live_.erase(key);
    s.live = false;
    Retire(key, SequenceEnd::kEndFlag,
           "sequence " + key.ToString() + " has ended (a request of it with sequence_end was accepted)");
  }
}

void SequenceTable::Dequeued(SlotRef slot, bool into_batch) {
  Slot& s = At(slot);
  if (s.queued > 0) --s.queued;
  if (into_batch) s.running = true;
}

bool SequenceTable::RunEnded(SlotRef slot, Clock::time_point now) {
  Slot& s = At(slot);
  s.running = false;
  if (FreeIfDone(slot)) return true;
  if (s.occupied && s.live && s.queued == 0) MarkIdle(slot, now);
  return false;
}

bool SequenceTable::EndEarly(SlotRef slot, SequenceEnd reason, const std::string& detail) {
  Slot& s = At(slot);
  if (s.occupied && s.live) {
    live_.erase(s.key);
    s.live = false;
    Retire(s.key, reason, detail);
  }
  UnmarkIdle(slot);
  return FreeIfDone(slot);
}

Clock::time_point SequenceTable::ExpireIdle(uint32_t instance, Clock::time_point now, std::vector<uint32_t>* freed) {
  auto& idle = idle_[instance];
  while (!idle.empty()) {
    const auto [since, index] = *idle.begin();
    if (since + max_idle_ > now) return since + max_idle_;
    idle.erase(idle.begin());
    Slot& s = slots_[instance][index];
    live_.erase(s.key);
    s.live = false;
    Retire(s.key, SequenceEnd::kIdleTimeout,
           "sequence " + s.key.ToString() + " was ended after " +
               std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(max_idle_).count()) +
               " us without a request (max_sequence_idle_microseconds)");
    if (FreeIfDone({instance, index})) freed->push_back(index);
  }
  return Clock::time_point::max();
}

void SequenceTable::DropAll() {
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    for (uint32_t s = 0; s < slots_per_instance_; ++s) {
      Slot& slot = slots_[i][s];
      if (slot.live) stats_->CountEnd(SequenceEnd::kShutdown);
      if (slot.occupied) free_.insert({s, i});
      slot = Slot{};
    }
    idle_[i].clear();
  }
  live_.clear();
  occupied_ = 0;
  stats_->active.store(0, std::memory_order_relaxed);
}

void SequenceTable::Retire(const SequenceKey& key, SequenceEnd reason, std::string detail) {
  stats_->CountEnd(reason);
  const uint64_t serial = ++retired_serial_;
  retired_[key] = {reason, std::move(detail), serial};
  retired_order_.emplace_back(key, serial);
  // An id retired twice is listed twice; its entry goes with the later one.
  while (retired_order_.size() > kRemembered) {
    const auto& [oldest, oldest_serial] = retired_order_.front();
    auto it = retired_.find(oldest);
    if (it != retired_.end() && it->second.serial == oldest_serial) retired_.erase(it);
    retired_order_.pop_front();
  }
}

bool SequenceTable::FreeIfDone(SlotRef slot) {
  Slot& s = At(slot);
  if (!s.occupied || s.live || s.queued > 0 || s.running) return false;
  UnmarkIdle(slot);
  s.occupied = false;
  free_.insert({slot.slot, slot.instance});
  --occupied_;
  stats_->active.store(occupied_, std::memory_order_relaxed);
  return true;
}

void SequenceTable::MarkIdle(SlotRef slot, Clock::time_point now) {
  Slot& s = At(slot);
  s.idle_since = now;
  idle_[slot.instance].insert({now, slot.slot});
}

void SequenceTable::UnmarkIdle(SlotRef slot) {
  const Slot& s = At(slot);
  idle_[slot.instance].erase({s.idle_since, slot.slot});
}

}  // namespace ortserve
