#pragma once
// Server readiness, as /v2/health/ready and gRPC's ServerReady report it:
// ready while the front end admits requests (not stopping, not marked not
// ready), the server is live (Liveness.h), and, with strict readiness, every
// model in the repository is ready.

#include <optional>
#include <string>

namespace ortserve {
class ModelRepository;
}

namespace ortserve::common {

class InferAdmission;

// nullopt when ready; else why not, for the client.
std::optional<std::string> NotReadyReason(const InferAdmission& admission, const ModelRepository& repository,
                                          bool strict_readiness);

}  // namespace ortserve::common
