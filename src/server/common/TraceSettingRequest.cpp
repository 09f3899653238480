#include "server/common/TraceSettingRequest.h"

namespace ortserve::common {

Result<TraceSettingFields> ServeTraceSetting(ModelRepository& repository, tracing::TraceSettings& settings,
                                             const std::string& model, const tracing::TraceSettingsChange* change) {
  if (!model.empty()) {
    auto found = repository.GetModel(model, "");
    if (!found.ok() || !(*found)->ready()) return InvalidArgument("Request for unknown model : " + model);
  }
  tracing::TraceSettingValues values;
  if (change) {
    auto updated = settings.Update(model, *change);
    if (!updated.ok()) return updated.status();
    values = *updated;
  } else {
    values = settings.Get(model);
  }
  // As Triton in its OpenTelemetry mode: no trace_file nor log_frequency,
  // the mode, and the exporter's url.
  TraceSettingFields fields;
  fields.emplace_back("trace_level", tracing::TraceLevelNames(values.level));
  fields.emplace_back("trace_rate", std::vector<std::string>{std::to_string(values.rate)});
  fields.emplace_back("trace_count", std::vector<std::string>{std::to_string(values.count)});
  fields.emplace_back("trace_mode", std::vector<std::string>{"opentelemetry"});
  if (!settings.collector_url().empty())
    fields.emplace_back("url", std::vector<std::string>{settings.collector_url()});
  return fields;
}

}  // namespace ortserve::common
