#include "server/http/HttpService.h"

#include <simdjson.h>

#include "server/common/Liveness.h"
#include "server/common/Readiness.h"
#include "server/http/Compression.h"
#include "server/http/HttpStatus.h"
#include "server/http/DriftJson.h"
#include "server/http/ShadowJson.h"
#include "server/http/JsonWriter.h"
#include "server/http/LoggingJson.h"
#include "server/http/ModelJson.h"
#include "server/http/SharedMemoryRoutes.h"
#include "server/http/TraceSettingJson.h"

namespace ortserve::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

HttpResponse JsonResponse(std::string body) {
  HttpResponse r;
  r.body = std::move(body);
  return r;
}

HttpResponse EmptyResponse(unsigned status) {
  HttpResponse r;
  r.status = status;
  r.content_type.clear();
  return r;
}

HttpResponse MethodNotAllowed(const HttpRequest& req, std::string_view allowed) {
  return HttpService::ErrorResponse(405, "method " + req.method + " is not allowed on " +
                                             std::string(req.target.substr(0, req.target.find('?'))) +
                                             " (use " + std::string(allowed) + ")");
}

}  // namespace

std::optional<auth::ApiGroup> HttpApiGroup(const std::vector<std::string>& p) {
  using auth::ApiGroup;
  const size_t n = p.size();
  if (n == 0 || p[0] != "v2") return std::nullopt;
  if (n == 1) return ApiGroup::kMetadata;
  const std::string& area = p[1];
  if (area == "health") return ApiGroup::kHealth;
  if (area == "repository") return ApiGroup::kModelRepository;
  if (area == "systemsharedmemory" || area == "cudasharedmemory") return ApiGroup::kSharedMemory;
  if (area == "trace") return ApiGroup::kTrace;
  if (area == "logging") return ApiGroup::kLogging;
  if (area != "models" || n < 3) return std::nullopt;
  if (n == 3 && p[2] == "stats") return ApiGroup::kStatistics;
  size_t i = 3;
  if (n >= 5 && p[3] == "versions") i = 5;
  if (n == i) return ApiGroup::kMetadata;
  if (n == i + 2 && p[i] == "trace" && p[i + 1] == "setting") return ApiGroup::kTrace;
  if (n != i + 1) return std::nullopt;
  const std::string& action = p[i];
  if (action == "ready") return ApiGroup::kHealth;
  if (action == "config") return ApiGroup::kModelConfig;
  if (action == "stats" || action == "rollout" || action == "drift" || action == "shadow") {
    return ApiGroup::kStatistics;
  }
  if (action == "infer" || action == "generate" || action == "generate_stream") return ApiGroup::kInference;
  return std::nullopt;
}

std::optional<std::vector<std::string>> SplitPath(std::string_view target) {
  target = target.substr(0, target.find('?'));
  std::vector<std::string> parts;
  parts.reserve(6);  // the longest API path, /v2/models/{m}/versions/{v}/infer: one allocation
  size_t pos = 0;
  while (pos < target.size()) {
    if (target[pos] == '/') { ++pos; continue; }
    size_t end = target.find('/', pos);
    if (end == std::string_view::npos) end = target.size();
    std::string seg;
    seg.reserve(end - pos);
    for (size_t i = pos; i < end; ++i) {
      if (target[i] != '%') { seg.push_back(target[i]); continue; }
      if (i + 2 >= end) return std::nullopt;
      const int hi = HexValue(target[i + 1]), lo = HexValue(target[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      seg.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    }
    parts.push_back(std::move(seg));
    pos = end;
  }
  return parts;
}

void CompressResponse(HttpResponse* response, std::string_view accept_encoding) {
  if (accept_encoding.empty() || response->size() == 0) return;
  const ContentCoding coding = ChooseResponseCoding(accept_encoding);
  if (coding == ContentCoding::kIdentity) return;
  std::vector<std::string_view> parts;
  parts.reserve(1 + response->tail.size());
  parts.emplace_back(response->body);
  for (const auto& t : response->tail) parts.emplace_back(reinterpret_cast<const char*>(t.data()), t.size());
  auto compressed = Compress(coding, parts);
  if (!compressed.ok()) return;  // identity is always acceptable
  response->body = std::move(*compressed);
  response->tail.clear();
  response->content_encoding = ContentCodingName(coding);
}

HttpService::HttpService(HttpServiceOptions options, ModelRepository* repository)
    : options_(std::move(options)),
      repository_(repository),
      shared_memory_(options_.shared_memory ? options_.shared_memory
                                            : std::make_shared<common::SharedMemoryRegistry>()),
      admission_(std::make_shared<common::InferAdmission>(
          repository, common::InferAdmission::Options{
                          .tracer = options_.tracer,
                          .stopping_message = "server is shutting down; not accepting inference requests",
                          .quotas = options_.quotas})) {}

HttpResponse HttpService::ErrorResponse(const Status& status) {
  return ErrorResponse(HttpStatusFor(status.code()), status.message());
}

HttpResponse HttpService::ErrorResponse(unsigned http_status, std::string_view message) {
  HttpResponse r;
  r.status = http_status;
  r.body = ErrorJson(message);
  return r;
}

void HttpService::Handle(HttpRequest request, RequestContext context) {
  auto reply = [&](HttpResponse r) { context.reply(std::move(r)); };
  auto path = SplitPath(request.target);
  if (!path) return reply(ErrorResponse(400, "malformed percent-escape in the request path"));
  const std::vector<std::string>& p = *path;
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  const size_t n = p.size();
  if (n == 0 || p[0] != "v2") return reply(ErrorResponse(404, "no such endpoint: " + request.target.substr(0, 256)));

  // Restricted APIs are refused before anything else about the request is
  // looked at (method, model name), so a refusal tells nothing either.
  if (std::optional<HttpResponse> refusal = AccessRefusal(request, p)) return reply(std::move(*refusal));

  if (n == 1) {
    return reply(get ? JsonResponse(ServerMetadataJson(common::DescribeServer(options_.server_version)))
                     : MethodNotAllowed(request, "GET"));
  }

  if (p[1] == "health" && n == 3 && (p[2] == "live" || p[2] == "ready")) {
    if (!get) return reply(MethodNotAllowed(request, "GET"));
    return reply(p[2] == "live" ? Live() : Ready());
  }

  if (p[1] == "logging" && n == 2) {
    if (!get && !post) return reply(MethodNotAllowed(request, "GET or POST"));
    return reply(HandleLogging(request));
  }
  if (p[1] == "trace" && n == 3 && p[2] == "setting") {
    if (!get && !post) return reply(MethodNotAllowed(request, "GET or POST"));
    return reply(HandleTraceSetting(request, ""));
  }

  if (p[1] == "repository") {
    if (n == 3 && p[2] == "index") {
      if (!post) return reply(MethodNotAllowed(request, "POST"));
      return reply(HandleRepositoryIndex(request));
    }
    if (n == 5 && p[2] == "models" && (p[4] == "load" || p[4] == "unload")) {
      if (!post) return reply(MethodNotAllowed(request, "POST"));
      return HandleModelControl(p[3], p[4] == "load", std::move(context));
    }
  }

  if (p[1] == "systemsharedmemory" || p[1] == "cudasharedmemory") {
    return reply(HandleSharedMemoryRequest(request.method, p, *request.body, *shared_memory_));
  }

  if (p[1] == "models" && n >= 3) {
    if (n == 3 && p[2] == "stats") {
      if (!get) return reply(MethodNotAllowed(request, "GET"));
      return reply(HandleStats("", ""));
    }
    const std::string& model = p[2];
    std::string version;
    size_t i = 3;
    if (n >= 5 && p[3] == "versions") {
      version = p[4];
      i = 5;
    }
    const size_t rest = n - i;
    if (rest == 0 || (rest == 1 && (p[i] == "ready" || p[i] == "config" || p[i] == "stats"))) {
      if (!get) return reply(MethodNotAllowed(request, "GET"));
      return reply(HandleModelGet(model, version, rest == 0 ? std::string_view{} : std::string_view(p[i])));
    }
    if (rest == 2 && i == 3 && p[i] == "trace" && p[i + 1] == "setting") {  // as Triton: no version
      if (!get && !post) return reply(MethodNotAllowed(request, "GET or POST"));
      return reply(HandleTraceSetting(request, model));
    }
    if (rest == 1 && i == 3 && p[i] == "rollout") {  // the model's, not a version's
      if (!get) return reply(MethodNotAllowed(request, "GET"));
      auto status = repository_->Rollout(model);
      if (!status.ok()) return reply(ErrorResponse(status.status()));
      return reply(JsonResponse(RolloutJson(*status)));
    }
    if (rest == 1 && i == 3 && p[i] == "shadow") {  // every serving version of the model
      if (!get) return reply(MethodNotAllowed(request, "GET"));
      return reply(HandleShadow(model));
    }
    if (rest == 1 && p[i] == "drift") {
      if (!get) return reply(MethodNotAllowed(request, "GET"));
      return reply(HandleDrift(request, model, version));
    }
    if (rest == 1 && p[i] == "infer") {
      if (!post) return reply(MethodNotAllowed(request, "POST"));
      return HandleInfer(request, model, version, std::move(context));
    }
  }
  return reply(ErrorResponse(404, "no such endpoint: " + request.target.substr(0, 256)));
}

std::optional<HttpResponse> HttpService::AccessRefusal(const HttpRequest& request,
                                                       const std::vector<std::string>& path) const {
  if (!options_.access_policy || options_.access_policy->empty()) return std::nullopt;
  const std::optional<auth::ApiGroup> group = HttpApiGroup(path);
  if (!group) return std::nullopt;
  const auto* restriction = options_.access_policy->RestrictionFor(*group);
  if (!restriction) return std::nullopt;
  std::optional<std::string_view> presented;
  for (const auto& [name, value] : request.auth_headers) {
    if (name == restriction->header) {
      presented = value;
      break;
    }
  }
  const auth::Verdict verdict = options_.access_policy->Check(*group, presented);
  if (verdict == auth::Verdict::kAllowed) return std::nullopt;
  return ErrorResponse(verdict == auth::Verdict::kMissing ? 401 : 403,
                       options_.access_policy->RefusalMessage(*group, verdict));
}

HttpResponse HttpService::Live() {
  if (std::optional<std::string> reason = common::NotLiveReason()) return ErrorResponse(503, *reason);
  return EmptyResponse(200);
}

HttpResponse HttpService::Ready() {
  // Triton answers a not-ready server with 400; tritonclient checks for 200.
  if (std::optional<std::string> reason = common::NotReadyReason(*admission_, *repository_, options_.strict_readiness))
    return ErrorResponse(400, *reason);
  return EmptyResponse(200);
}

HttpResponse HttpService::HandleModelGet(const std::string& model, const std::string& version,
                                         std::string_view action) {
  if (action == "stats") return HandleStats(model, version);
  if (action.empty()) {
    auto metadata = common::DescribeModel(*repository_, model, version);
    if (!metadata.ok()) return ErrorResponse(metadata.status());
    return JsonResponse(ModelMetadataJson(*metadata));
  }
  if (action == "ready") {
    // As Triton: 200 when ready, 400 for any other version of a model it
    // knows (with GetModel's reason); 404 for a model name it does not know.
    Result<bool> ready = IsModelVersionReady(*repository_, model, version);
    if (!ready.ok()) return ErrorResponse(404, ready.status().message());
    if (ready.value()) return EmptyResponse(200);
    if (repository_->NeedsLoad(model)) {
      return ErrorResponse(400, "model '" + model + "' is not loaded; it loads on its first inference request");
    }
    auto why = repository_->GetModel(model, version);  // why not: GetModel's words
    return ErrorResponse(400, why.ok() ? "Model version not ready" : why.status().message());
  }
  auto m = repository_->GetModel(model, version);
  if (!m.ok()) return ErrorResponse(m.status());
  auto json = ModelConfigJson((*m)->config());  // action == "config"
  if (!json.ok()) return ErrorResponse(json.status());
  return JsonResponse(std::move(*json));
}

HttpResponse HttpService::HandleStats(const std::string& model, const std::string& version) {
  auto stats = common::SnapshotStatistics(*repository_, model, version);
  if (!stats.ok()) return ErrorResponse(stats.status());
  return JsonResponse(ModelStatsJson(*stats));
}

HttpResponse HttpService::HandleDrift(const HttpRequest& request, const std::string& model,
                                      const std::string& version) {
  const size_t q = request.target.find('?');
  const std::string_view query = q == std::string::npos ? std::string_view{} : std::string_view(request.target).substr(q + 1);
  if (!query.empty() && query != "format=profile" && query != "format=json") {
    return ErrorResponse(400, "unsupported query '" + std::string(query.substr(0, 256)) +
                                  "': drift takes format=json (the default) or format=profile");
  }
  std::vector<std::shared_ptr<Model>> models;
  if (!version.empty()) {
    auto m = repository_->GetModel(model, version);
    if (!m.ok()) return ErrorResponse(m.status());
    models.push_back(std::move(m).value());
  } else {
    auto ready = ReadyVersions(model);
    if (!ready.ok()) return ErrorResponse(ready.status());
    models = std::move(ready).value();
  }
  if (std::none_of(models.begin(), models.end(), [](const auto& m) { return m->drift() != nullptr; })) {
    return ErrorResponse(400, "model '" + model + "' has no drift statistics: set parameter '" +
                                  kDriftBaselineRequestsParameter + "' or '" + kDriftReferenceParameter + "'");
  }
  if (query != "format=profile") return JsonResponse(DriftJson(model, models));
  auto text = DriftProfileText(models);
  if (!text.ok()) return ErrorResponse(text.status());
  HttpResponse r;
  r.content_type = "text/plain";
  r.body = std::move(text).value();
  return r;
}

Result<std::vector<std::shared_ptr<Model>>> HttpService::ReadyVersions(const std::string& model) const {
  std::vector<std::shared_ptr<Model>> models;
  for (auto& m : repository_->ReadyModels()) {
    if (m->name() == model) models.push_back(std::move(m));
  }
  if (!models.empty()) return models;
  auto m = repository_->GetModel(model, "");  // why not: GetModel's words
  if (!m.ok()) return m.status();
  return InvalidArgument("model '" + model + "' has no ready version");
}

HttpResponse HttpService::HandleShadow(const std::string& model) {
  auto models = ReadyVersions(model);
  if (!models.ok()) return ErrorResponse(models.status());
  if (std::none_of(models->begin(), models->end(), [](const auto& m) { return m->shadow() != nullptr; })) {
    return ErrorResponse(400, "model '" + model + "' has no shadow comparison: set parameters '" +
                                  kShadowVersionParameter + "' and '" + kShadowFractionParameter + "'");
  }
  return JsonResponse(ShadowJson(model, models.value()));
}

HttpResponse HttpService::HandleRepositoryIndex(const HttpRequest& request) {
  bool ready_only = false;
  const std::string& body = *request.body;
  if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
    if (body.size() > 4096) return ErrorResponse(400, "repository index request body is too large");
    simdjson::dom::parser parser;
    simdjson::dom::object obj;
    if (parser.parse(body.data(), body.size(), true).get_object().get(obj) != simdjson::SUCCESS)
      return ErrorResponse(400, "repository index request body must be a JSON object");
    if (simdjson::dom::element r; obj.at_key("ready").get(r) == simdjson::SUCCESS) {
      if (r.get_bool().get(ready_only) != simdjson::SUCCESS)
        return ErrorResponse(400, "repository index: 'ready' must be a boolean");
    }
  }
  return JsonResponse(RepositoryIndexJson(repository_->Index(), ready_only));
}

void HttpService::HandleModelControl(const std::string& model, bool load, RequestContext context) {
  // The body ({"parameters": {...}}) is accepted and ignored: ortserve reads
  // config and files from the repository only.
  if (repository_->control_mode() != ModelControlMode::kExplicit) {
    // Triton answers 400 here.
    return context.reply(ErrorResponse(400, ModelControlDisabledMessage(repository_->control_mode())));
  }
  if (!options_.allow_unauthenticated_model_control &&
      !(options_.access_policy && options_.access_policy->restricted(auth::ApiGroup::kModelRepository))) {
    return context.reply(ErrorResponse(403, auth::ModelControlNeedsAuthMessage("--http-restricted-api")));
  }
  // The load runs on the repository's loader thread; the reply is posted back
  // to this connection's I/O thread when it is done.
  auto done = [post = std::move(context.post), reply = std::move(context.reply),
               in_flight = std::make_shared<common::InFlightHold>(HoldInFlight())](Status status) {
    post([reply, status] {
      // Triton answers a failed load or unload with 400.
      reply(status.ok() ? EmptyResponse(200)
                        : ErrorResponse(status.code() == StatusCode::kUnavailable ? 503 : 400, status.message()));
    });
    in_flight->Release();
  };
  if (load) {
    repository_->LoadAsync(model, std::move(done));
  } else {
    repository_->UnloadAsync(model, std::move(done));
  }
}

HttpResponse HttpService::HandleLogging(const HttpRequest& request) {
  common::LogControl* log = options_.runtime_settings.log.get();
  if (!log) return ErrorResponse(503, "the server does not support dynamic logging");
  if (request.method == "POST") {
    auto change = ParseLogSettingsChange(*request.body);
    if (!change.ok()) return ErrorResponse(change.status());
    log->Apply(*change);
  }
  return JsonResponse(LogSettingsJson(log->Current()));
}

HttpResponse HttpService::HandleTraceSetting(const HttpRequest& request, const std::string& model) {
  tracing::TraceSettings* settings = options_.runtime_settings.trace.get();
  if (!settings) return ErrorResponse(503, "the server does not support tracing");
  std::optional<tracing::TraceSettingsChange> change;
  if (request.method == "POST") {
    auto parsed = ParseTraceSettingsChange(*request.body);
    if (!parsed.ok()) return ErrorResponse(parsed.status());
    change = std::move(*parsed);
  }
  auto fields = common::ServeTraceSetting(*repository_, *settings, model, change ? &*change : nullptr);
  if (!fields.ok()) return ErrorResponse(fields.status());
  return JsonResponse(TraceSettingJson(*fields));
}

}  // namespace ortserve::http
