#include "server/common/InferAdmission.h"

namespace ortserve::common {

InferAdmission::InferAdmission(ModelRepository* repository, Options options)
    : repository_(repository), options_(std::move(options)) {}

Status InferAdmission::CheckAccepting() const {
  if (accepting()) return Status::Ok();
  return Unavailable(options_.stopping_message);
}

}  // namespace ortserve::common
