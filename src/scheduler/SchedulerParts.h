#pragma once
// What every batcher checks of the parts it is given before it starts, and
// the instance list its run watchdog takes.
#include <memory>
#include <string>
#include <vector>

#include "core/ModelStatistics.h"
#include "core/Status.h"
#include "runtime/ModelInstance.h"
#include "scheduler/Scheduler.h"

namespace ortserve {

// kInvalidArgument beginning with `label` ("model 'x' version '1'") when
// there is no instance, a null one, no statistics object or no completer.
inline Status CheckSchedulerParts(const std::string& label, const std::vector<std::unique_ptr<ModelInstance>>& instances,
                                  const ModelStatistics* stats, const RequestCompleter* completer) {
  if (instances.empty()) return InvalidArgument(label + " has no instances to schedule on");
  for (const auto& instance : instances)
    if (!instance) return InvalidArgument(label + ": null model instance");
  if (!stats) return InvalidArgument(label + ": no statistics object");
  if (!completer) return InvalidArgument(label + ": no request completer");
  return Status::Ok();
}

// The instances, not owned (RunWatchdog's view of them).
inline std::vector<ModelInstance*> InstancePointers(const std::vector<std::unique_ptr<ModelInstance>>& instances) {
  std::vector<ModelInstance*> out;
  out.reserve(instances.size());
  for (const auto& instance : instances) out.push_back(instance.get());
  return out;
}

}  // namespace ortserve
