#include "server/common/InferAdmission.h"

namespace ortserve::common {

InferAdmission::InferAdmission(ModelRepository* repository, Options options)
    : repository_(repository), options_(std::move(options)) {}

Status InferAdmission::CheckAccepting() const {
  if (accepting()) return Status::Ok();
  return Unavailable(options_.stopping_message);
}

Status InferAdmission::CheckQuotaEarly(const std::string& model, const std::string& version, QuotaCheck* quota) {
  if (!options_.quotas || quota == nullptr || quota->admitted.acquired) return Status::Ok();
  auto found = repository_->GetModel(model, version);
  if (!found.ok()) return Status::Ok();
  auto acquired = AcquireQuota(model, quota);
  if (!acquired.ok()) return acquired.status();
  quota->admitted = {std::move(acquired).value(), true};
  quota->model = std::move(found).value();
  return Status::Ok();
}

Result<std::shared_ptr<QuotaTicket>> InferAdmission::AcquireQuota(const std::string& model, QuotaCheck* quota) {
  auto acquired = options_.quotas->Acquire(quota->client, model);
  if (auto* refused = std::get_if<QuotaRejection>(&acquired)) {
    Status status = Unavailable(refused->message);
    quota->rejection = std::move(*refused);
    return status;
  }
  auto& ticket = std::get<QuotaTicket>(acquired);
  if (!ticket) return std::shared_ptr<QuotaTicket>();
  return std::make_shared<QuotaTicket>(std::move(ticket));
}

}  // namespace ortserve::common
