#include "server/grpc/SettingsCalls.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/TraceSettingRequest.h"
#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcServiceCore.h"

namespace ortserve::grpcfe {
namespace {

using LogValue = inference::LogSettingsRequest::SettingValue;

Status TypeError(const std::string& key, std::string_view expected) {
  return InvalidArgument("expect " + std::string(expected) + " for '" + key + "'");
}

Result<common::LogSettingsChange> ParseLogChange(const inference::LogSettingsRequest& request) {
  common::LogSettingsChange change;
  for (const auto& [key, value] : request.settings()) {
    if (key == "log_file") return common::LogFileNotChangeable();
    if (key == "log_info" || key == "log_warning" || key == "log_error") {
      if (value.parameter_choice_case() != LogValue::kBoolParam) return TypeError(key, "boolean");
      (key == "log_info" ? change.info : key == "log_warning" ? change.warning : change.error) = value.bool_param();
    } else if (key == "log_verbose_level") {
      if (value.parameter_choice_case() != LogValue::kUint32Param) return TypeError(key, "uint32");
      change.verbose_level = value.uint32_param();
    } else if (key == "log_format") {
      if (value.parameter_choice_case() != LogValue::kStringParam) return TypeError(key, "string");
      auto format = common::ParseLogFormat(value.string_param());
      if (!format) return common::UnknownLogFormat(value.string_param());
      change.format = *format;
    } else {
      return InvalidArgument("unknown log setting '" + key.substr(0, 64) +
                             "' (known: log_file, log_info, log_warning, log_error, log_verbose_level, log_format)");
    }
  }
  return change;
}

Result<tracing::TraceSettingsChange> ParseTraceChange(const inference::TraceSettingRequest& request) {
  tracing::TraceSettingsChange change;
  for (const auto& [key, value] : request.settings()) {
    std::optional<std::vector<std::string_view>> values;
    if (value.value_size() > 0) values.emplace(value.value().begin(), value.value().end());
    ORTSERVE_RETURN_IF_ERROR(tracing::AddTraceSettingChange(key, values, &change));
  }
  return change;
}

}  // namespace

grpc::Status LogSettings(GrpcServiceCore& core, const inference::LogSettingsRequest& request,
                         inference::LogSettingsResponse* response) {
  common::LogControl* log = core.options().runtime_settings.log.get();
  if (!log) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server does not support dynamic logging");
  if (!request.settings().empty()) {
    auto change = ParseLogChange(request);
    if (!change.ok()) return ToGrpcStatus(change.status());
    log->Apply(*change);
  }
  const common::LogSettings current = log->Current();
  auto& out = *response->mutable_settings();
  out["log_file"].set_string_param(current.file);
  out["log_info"].set_bool_param(current.info);
  out["log_warning"].set_bool_param(current.warning);
  out["log_error"].set_bool_param(current.error);
  out["log_verbose_level"].set_uint32_param(current.verbose_level);
  out["log_format"].set_string_param(std::string(common::LogFormatName(current.format)));
  return grpc::Status::OK;
}

grpc::Status TraceSetting(GrpcServiceCore& core, const inference::TraceSettingRequest& request,
                          inference::TraceSettingResponse* response) {
  tracing::TraceSettings* settings = core.options().runtime_settings.trace.get();
  if (!settings) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server does not support tracing");
  std::optional<tracing::TraceSettingsChange> change;
  if (!request.settings().empty()) {
    auto parsed = ParseTraceChange(request);
    if (!parsed.ok()) return ToGrpcStatus(parsed.status());
    change = std::move(*parsed);
  }
  auto fields = common::ServeTraceSetting(core.repository(), *settings, request.model_name(),
                                          change ? &*change : nullptr);
  if (!fields.ok()) return ToGrpcStatus(fields.status());
  for (const auto& [name, values] : *fields) {
    auto& setting = (*response->mutable_settings())[name];
    for (const std::string& v : values) setting.add_value(v);
  }
  return grpc::Status::OK;
}

}  // namespace ortserve::grpcfe
