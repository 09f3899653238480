#include "server/http/HttpService.h"

#include <simdjson.h>

#include <algorithm>
#include <limits>

#include "server/http/Compression.h"
#include "server/http/HttpStatus.h"
#include "server/http/InferRequestDecoder.h"
#include "server/http/InferResponseEncoder.h"
#include "server/http/JsonWriter.h"
#include "server/http/LoggingJson.h"
#include "server/http/DriftJson.h"
#include "server/http/ModelJson.h"
#include "server/http/SharedMemoryRoutes.h"
#include "server/http/RawInferRequest.h"
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

// A compressed body inflates on the I/O thread up to this many bytes; a body
// that inflates to more is finished on the inflate worker (InflateWorker.h),
// so that a gzip bomb holds up no other connection.
constexpr size_t kInlineInflateBytes = size_t{64} << 10;

// The infer request in `body` (inflated already). A raw binary request
// (RawInferRequest.h) is read against the config of `target`, looked up
// first when null.
Result<DecodedInferRequest> DecodeInferBody(std::shared_ptr<const std::string> body,
                                            const std::optional<std::string>& inference_header_length,
                                            const HttpServiceOptions& options, ModelRepository& repository,
                                            const std::string& model, const std::string& version,
                                            std::shared_ptr<Model> target) {
  std::optional<std::string_view> header_length;
  if (inference_header_length) header_length = *inference_header_length;
  if (header_length && IsRawRequestHeaderLength(*header_length)) {
    if (!target) {
      auto found = repository.GetModel(model, version);
      if (!found.ok()) return found.status();
      target = std::move(found).value();
    }
    return DecodeRawInferRequest(std::move(body), model, target->config(), options.decode);
  }
  return DecodeInferRequest(std::move(body), header_length, options.decode);
}

// The response to an infer request that the model answered with `result`,
// compressed as `accept_encoding` allows. As Triton, only an infer response
// that succeeded is ever compressed: clients that send Accept-Encoding without
// decompressing (tritonclient.http.aio's aiohttp session) read every other
// answer, errors included, as it is.
HttpResponse EncodeInferResult(const Result<InferenceResponse>& result, bool listed, bool binary_default,
                               std::string_view accept_encoding, const common::SharedMemoryOutputs* shm_outputs) {
  if (!result.ok()) return HttpService::ErrorResponse(result.status());
  std::optional<SharedMemoryPlacements> placed;
  if (shm_outputs) {
    auto written = shm_outputs->Write(result.value());
    if (!written.ok()) return HttpService::ErrorResponse(written.status());
    placed = std::move(written).value();
  }
  auto enc = EncodeInferResponse(result.value(), listed, binary_default, placed ? &*placed : nullptr);
  if (!enc.ok()) return HttpService::ErrorResponse(enc.status());
  HttpResponse r;
  r.body = std::move(enc->json);
  if (enc->has_binary()) {
    r.inference_header_length = r.body.size();
    r.content_type = "application/octet-stream";
    r.tail = std::move(enc->binary);
  }
  CompressResponse(&r, accept_encoding);
  return r;
}

// The access-log line (and a traced request's spans) of an infer request
// answered with `r`; `response` is null unless the model answered it.
void ReportInfer(const tracing::CompletionReport& report, std::string_view id, std::string_view model,
                 std::string_view version, const HttpResponse& r, uint64_t bytes_in,
                 const InferenceResponse* response) {
  AccessLogRecord record;
  record.protocol = "http";
  record.request_id = id;
  record.model = model;
  record.version = version;
  record.status_code = static_cast<int>(r.status);
  record.bytes_in = bytes_in;
  record.bytes_out = r.size();
  if (response) record.SetResponse(*response);
  report(record);
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
  if (action == "stats" || action == "rollout" || action == "drift") return ApiGroup::kStatistics;
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
    return reply(p[2] == "live" ? EmptyResponse(200) : Ready());
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

HttpResponse HttpService::Ready() {
  // Triton answers a not-ready server with 400; tritonclient checks for 200.
  if (!admission_->ready()) return ErrorResponse(400, "server is shutting down");
  if (options_.strict_readiness && !repository_->AllModelsReady())
    return ErrorResponse(400, "not every model in the repository is ready (strict readiness)");
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
    for (auto& m : repository_->ReadyModels()) {
      if (m->name() == model) models.push_back(std::move(m));
    }
    if (models.empty()) {
      auto m = repository_->GetModel(model, version);  // why not: GetModel's words
      return m.ok() ? ErrorResponse(400, "model '" + model + "' has no ready version") : ErrorResponse(m.status());
    }
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
  admission_->in_flight().Add();
  auto done = [post = std::move(context.post), reply = std::move(context.reply),
               admission = admission_](Status status) {
    post([reply, status] {
      // Triton answers a failed load or unload with 400.
      reply(status.ok() ? EmptyResponse(200)
                        : ErrorResponse(status.code() == StatusCode::kUnavailable ? 503 : 400, status.message()));
    });
    admission->in_flight().Done();
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

// A compressed infer request while its body inflates on the inflate worker:
// what the worker needs, then what it hands back to the connection's thread.
struct HttpService::InflateJob {
  std::shared_ptr<const std::string> compressed;  // what `inflater` reads
  std::unique_ptr<Inflater> inflater;
  std::optional<std::string> inference_header_length;
  std::shared_ptr<Model> target;
  std::string model;
  std::string version;
  InferArrival arrival;
  Result<DecodedInferRequest> decoded = Internal("the request body was not inflated");
  // Counted in flight from its hand-over until it is admitted or dropped,
  // so that shutdown waits for it as for a request inside a model.
  std::shared_ptr<common::InferAdmission> admission;
  ~InflateJob() {
    if (admission) admission->in_flight().Done();
  }
};

void HttpService::FailInfer(const Status& status, const std::string& model, const std::string& version,
                            InferArrival& arrival) {
  HttpResponse r = ErrorResponse(status);
  if (arrival.report) ReportInfer(arrival.report, {}, model, version, r, arrival.bytes_in, nullptr);
  arrival.context.reply(std::move(r));
}

void HttpService::HandleInfer(HttpRequest& request, const std::string& model, const std::string& version,
                              RequestContext context) {
  InferArrival arrival{.report = admission_->StartReport(request.traceparent, model),
                       .bytes_in = request.body->size(),
                       .accept_encoding = std::move(request.accept_encoding),
                       .context = std::move(context),
                       .client_id = std::move(request.client_id)};
  if (Status accepting = admission_->CheckAccepting(); !accepting.ok())
    return FailInfer(accepting, model, version, arrival);
  if (repository_->NeedsLoad(model)) return AwaitModelLoad(request, model, version, std::move(arrival));
  DecodeInfer(request, model, version, std::move(arrival));
}

struct HttpService::LoadWait {
  HttpRequest request;
  std::string model;
  std::string version;
  InferArrival arrival;
  // Counted in flight while it waits, so that shutdown waits for it too.
  std::shared_ptr<common::InferAdmission> admission;
  ~LoadWait() {
    if (admission) admission->in_flight().Done();
  }
};

void HttpService::AwaitModelLoad(HttpRequest& request, const std::string& model, const std::string& version,
                                 InferArrival arrival) {
  auto wait = std::make_shared<LoadWait>();
  wait->request = std::move(request);
  wait->model = model;
  wait->version = version;
  wait->arrival = std::move(arrival);
  admission_->in_flight().Add();
  wait->admission = admission_;
  auto post = wait->arrival.context.post;
  repository_->WhenLoaded(model, Clock::time_point::max(), [this, wait, post](Status loaded) {
    // Back on the connection's thread (dropped when the client left).
    post([this, wait, loaded] {
      if (!loaded.ok()) return FailInfer(loaded, wait->model, wait->version, wait->arrival);
      if (Status accepting = admission_->CheckAccepting(); !accepting.ok())
        return FailInfer(accepting, wait->model, wait->version, wait->arrival);
      DecodeInfer(wait->request, wait->model, wait->version, std::move(wait->arrival));
    });
  });
}

void HttpService::DecodeInfer(HttpRequest& request, const std::string& model, const std::string& version,
                              InferArrival arrival) {
  auto coding = ParseContentEncoding(request.content_encoding);
  if (!coding.ok()) return FailInfer(coding.status(), model, version, arrival);
  if (*coding != ContentCoding::kIdentity) return InflateInfer(request, *coding, model, version, std::move(arrival));
  AdmitInfer(DecodeInferBody(request.body, request.inference_header_length, options_, *repository_, model, version,
                             nullptr),
             model, version, std::move(arrival));
}

void HttpService::InflateInfer(HttpRequest& request, ContentCoding coding, const std::string& model,
                               const std::string& version, InferArrival arrival) {
  // The model first: a request for one that is not there costs no inflating.
  auto target = repository_->GetModel(model, version);
  if (!target.ok()) return FailInfer(target.status(), model, version, arrival);
  std::shared_ptr<const std::string> compressed = request.body;
  auto inflater = Inflater::Start(coding, *compressed, options_.max_input_size);
  if (!inflater.ok()) return FailInfer(inflater.status(), model, version, arrival);
  auto done = (*inflater)->Run(kInlineInflateBytes);
  if (!done.ok()) return FailInfer(done.status(), model, version, arrival);
  if (*done) {
    auto body = std::make_shared<const std::string>((*inflater)->TakeOutput());
    return AdmitInfer(DecodeInferBody(std::move(body), request.inference_header_length, options_, *repository_,
                                      model, version, std::move(target).value()),
                      model, version, std::move(arrival));
  }
  auto job = std::make_shared<InflateJob>();
  job->compressed = std::move(compressed);
  job->inflater = std::move(inflater).value();
  job->inference_header_length = request.inference_header_length;
  job->target = std::move(target).value();
  job->model = model;
  job->version = version;
  job->arrival = std::move(arrival);
  admission_->in_flight().Add();
  job->admission = admission_;
  // Dropped unrun when the client leaves first: nobody waits for the answer.
  inflate_worker_->Submit(job->arrival.context.cancelled, [this, job] {
    auto finished = job->inflater->Run(std::numeric_limits<size_t>::max());
    if (finished.ok()) {
      auto body = std::make_shared<const std::string>(job->inflater->TakeOutput());
      job->decoded = DecodeInferBody(std::move(body), job->inference_header_length, options_, *repository_,
                                     job->model, job->version, job->target);
    } else {
      job->decoded = finished.status();
    }
    job->inflater.reset();
    job->compressed.reset();
    job->target.reset();
    // Admission happens on the connection's thread, as for every request;
    // the service outlives a connection that still runs what it posts.
    job->arrival.context.post([this, job] {
      if (Status accepting = admission_->CheckAccepting(); !accepting.ok())
        return FailInfer(accepting, job->model, job->version, job->arrival);
      AdmitInfer(std::move(job->decoded), job->model, job->version, std::move(job->arrival));
    });
  });
}

void HttpService::AdmitInfer(Result<DecodedInferRequest> decoded, const std::string& model,
                             const std::string& version, InferArrival arrival) {
  if (!decoded.ok()) return FailInfer(decoded.status(), model, version, arrival);

  InferenceRequest& req = *decoded->request;
  std::shared_ptr<const common::SharedMemoryOutputs> shm_outputs;
  if (!decoded->shared_memory.empty()) {
    auto bound = common::BindSharedMemory(*shared_memory_, decoded->shared_memory, &req);
    if (!bound.ok()) return FailInfer(bound.status(), model, version, arrival);
    shm_outputs = std::move(bound).value();
  }
  req.model_name = model;
  req.model_version = version;
  const bool listed = decoded->outputs_listed;
  const bool binary_default = decoded->binary_data_output;
  tracing::CompletionReport& report = arrival.report;
  // Only the access log and tracing need the names back; don't copy them otherwise.
  std::string id = report ? req.id : std::string();
  std::string log_model = report ? model : std::string();
  std::string log_version = report ? version : std::string();
  std::shared_ptr<RequestTrace> trace = report.trace;
  CancelFlag cancelled = std::move(arrival.context.cancelled);
  const uint64_t bytes_in = arrival.bytes_in;
  common::InferAdmission::QuotaCheck quota{.client = arrival.client_id, .rejection = {}};
  Status admitted = admission_->Admit(std::move(decoded->request), std::move(cancelled), std::move(trace), [&] {
    // Runs exactly once, so it moves its captures on to the connection's I/O
    // thread; `admission` stays, keeping the in-flight counter alive.
    return [post = std::move(arrival.context.post), reply = std::move(arrival.context.reply), listed,
            binary_default, accept = std::move(arrival.accept_encoding), admission = admission_,
            report = std::move(report), shm_outputs = std::move(shm_outputs), id = std::move(id),
            model = std::move(log_model), version = std::move(log_version),
            bytes_in](Result<InferenceResponse> result) mutable {
      auto shared = std::make_shared<Result<InferenceResponse>>(std::move(result));
      // Encoding happens on the connection's I/O thread, never on the thread
      // that finished the inference.
      post([reply = std::move(reply), shared, listed, binary_default, accept = std::move(accept),
            shm_outputs = std::move(shm_outputs), report = std::move(report), id = std::move(id), model = std::move(model), version = std::move(version),
            bytes_in] {
        HttpResponse r = EncodeInferResult(*shared, listed, binary_default, accept, shm_outputs.get());
        if (report) {
          ReportInfer(report, id, model, version, r, bytes_in, shared->ok() ? &shared->value() : nullptr);
        }
        reply(std::move(r));
      });
    };
  }, admission_->quotas() ? &quota : nullptr);
  if (quota.rejection) {
    HttpResponse r = ErrorResponse(429, quota.rejection->message);
    r.retry_after_s = quota.rejection->retry_after_s;
    if (arrival.report) ReportInfer(arrival.report, {}, model, version, r, arrival.bytes_in, nullptr);
    return arrival.context.reply(std::move(r));
  }
  if (!admitted.ok()) return FailInfer(admitted, model, version, arrival);
}

}  // namespace ortserve::http
