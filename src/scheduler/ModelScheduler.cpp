#include "scheduler/ModelScheduler.h"

#include "scheduler/SchedulerImpl.h"

namespace ortserve {

Result<std::unique_ptr<ModelScheduler>> ModelScheduler::Create(
    SchedulerOptions options, std::vector<std::unique_ptr<ModelInstance>> instances,
    ModelStatistics* stats) {
  return CreateModelScheduler(std::move(options), std::move(instances), stats,
                              std::make_shared<SteadySchedulerClock>());
}

}  // namespace ortserve
