#include "server/common/Readiness.h"

#include "repository/ModelRepository.h"
#include "server/common/InferAdmission.h"
#include "server/common/Liveness.h"

namespace ortserve::common {

std::optional<std::string> NotReadyReason(const InferAdmission& admission, const ModelRepository& repository,
                                          bool strict_readiness) {
  if (!admission.ready()) return "server is shutting down";
  if (std::optional<std::string> reason = NotLiveReason()) return reason;
  if (strict_readiness && !repository.AllModelsReady())
    return "not every model in the repository is ready (strict readiness)";
  return std::nullopt;
}

}  // namespace ortserve::common
