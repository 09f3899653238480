#pragma once
// The KServe v2 HTTP API without sockets: routes a request, talks to the
// repository, and produces a response. HttpServer feeds it from Beast; tests
// feed it directly.
//
// Threads: Handle() runs on the connection's I/O thread and never blocks. Infer
// requests go through the shared admission step (server/common/
// InferAdmission.h) to Model::Infer; their completion (on any thread) is
// posted back through RequestContext::post, and the response is encoded and
// replied there. A compressed body that inflates to more than a small budget
// is inflated and decoded on the service's inflate worker ("http-inflate",
// InflateWorker.h) and posted back the same way to be admitted.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/AccessLogRecord.h"
#include "core/InferenceRequest.h"
#include "core/Tensor.h"
#include "repository/ModelRepository.h"
#include "server/auth/AccessPolicy.h"
#include "server/common/InferAdmission.h"
#include "server/common/SharedMemoryRegistry.h"
#include "server/common/RuntimeSettings.h"
#include "server/http/Compression.h"
#include "server/http/InferRequestDecoder.h"
#include "server/http/InflateWorker.h"
#include "server/tracing/RequestTracer.h"

namespace ortserve::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query, as sent
  std::shared_ptr<std::string> body = std::make_shared<std::string>();
  std::string content_encoding;
  std::string accept_encoding;
  std::optional<std::string> inference_header_length;
  // Values of the headers the access policy names (lowercase name, value),
  // captured by the server only when a policy is set; the first of repeats.
  std::vector<std::pair<std::string, std::string>> auth_headers;
  // The W3C traceparent header (repeats joined by ','), captured only when
  // tracing is on.
  std::optional<std::string> traceparent;
  // The client's id for quotas (ClientQuotas.h), set only when quotas are on.
  std::string client_id;
};

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Sent after `body` without copying (binary output tensors).
  std::vector<TensorData> tail;
  std::optional<size_t> inference_header_length;
  std::string content_encoding;  // empty: identity
  // Sent as Retry-After when set (a quota refusal).
  std::optional<uint32_t> retry_after_s;
  // After this response the connection's next request is not read before
  // this much time has passed (a quota refusal: HttpSession::PauseReading).
  std::chrono::microseconds pause_reading{0};
  // The server should close the connection after this response.
  bool close = false;
  size_t size() const {
    size_t n = body.size();
    for (const auto& t : tail) n += t.size();
    return n;
  }
};

struct RequestContext {
  // Runs `fn` on the connection's I/O thread, or drops it if the connection is
  // gone. Safe to call from any thread, at any time.
  std::function<void(std::function<void()>)> post;
  // Sends the response; called exactly once, on the connection's I/O thread.
  std::function<void(HttpResponse)> reply;
  // Set when the client goes away; handed to the request.
  CancelFlag cancelled;
};

struct HttpServiceOptions {
  size_t max_input_size = size_t{64} << 20;
  // How infer request bodies are decoded (their tensor byte limit is
  // max_input_size).
  InferDecodeOptions decode{};
  bool strict_readiness = false;
  std::string server_version;
  // --http-restricted-api; empty: every API open.
  std::shared_ptr<const auth::AccessPolicy> access_policy{};
  // Explicit mode: POST /v2/repository/models/<m>/load|unload are refused
  // (403) unless the model-repository group is restricted by access_policy
  // or this is set (--allow-unauthenticated-model-control).
  bool allow_unauthenticated_model_control = false;
  // Null: tracing is off (--trace-otlp-endpoint unset).
  std::shared_ptr<const tracing::RequestTracer> tracer{};
  // Null: a registry of the service's own, client shared memory disabled.
  std::shared_ptr<common::SharedMemoryRegistry> shared_memory{};
  // GET/POST /v2/logging and /v2[/models/<m>]/trace/setting.
  common::RuntimeSettings runtime_settings{};
  // Per-client quotas; null: none.
  std::shared_ptr<common::ClientQuotas> quotas{};
};

class HttpService {
 public:
  HttpService(HttpServiceOptions options, ModelRepository* repository);

  void Handle(HttpRequest request, RequestContext context);

  // After this, health/ready answers not-ready and new infer requests 503.
  void StopAccepting() { admission_->StopAccepting(); }
  void MarkNotReady() { admission_->MarkNotReady(); }
  bool accepting() const { return admission_->accepting(); }
  // Infer requests inside a model and model loads/unloads under way.
  common::InFlightCounter* in_flight() const { return &admission_->in_flight(); }
  // Called once per completed infer request; set before serving. Empty: none.
  void set_access_log(AccessLogSink sink) { admission_->set_access_log(std::move(sink)); }
  // Stops the inflate worker: bodies still waiting there are dropped unanswered
  // (their connections are closing). For the server's Stop(), after its I/O
  // threads have stopped; idempotent.
  void StopInflating() { inflate_worker_->Stop(); }

  // Builds an error response ({"error": message}) with the mapped status.
  static HttpResponse ErrorResponse(const Status& status);
  static HttpResponse ErrorResponse(unsigned http_status, std::string_view message);

 private:
  // An infer request from its arrival to its admission: what its answer
  // needs, whichever thread decodes it.
  struct InferArrival {
    tracing::CompletionReport report;
    uint64_t bytes_in = 0;
    std::string accept_encoding;
    RequestContext context;
    std::string client_id;  // quotas on only
    // Its admission once the quota was checked before decoding
    // (InferAdmission::CheckQuotaEarly); not acquired: Admit checks.
    common::InferAdmission::QuotaAdmission quota{};
    // The model that check found, for the decoding and Admit; dropped while
    // the request waits for a load. Null: looked up where needed.
    std::shared_ptr<Model> model{};
    int load_waits = 0;     // on-demand loads it waited for (InferAdmission::AwaitsAnotherLoad)
  };
  struct InflateJob;
  struct LoadWait;
  void HandleInfer(HttpRequest& request, const std::string& model, const std::string& version,
                   RequestContext context);
  // --model-load-on-demand: parks the request off the connection's thread
  // until its model's load ends, then goes on with it there (DecodeInfer),
  // or waits again when the model was evicted meanwhile (AwaitsAnotherLoad).
  void AwaitModelLoad(HttpRequest& request, const std::string& model, const std::string& version,
                      InferArrival arrival);
  // The quota check before the body is decoded: false when it refused the
  // request, which is then answered (429 with Retry-After).
  bool CheckQuotaEarly(const std::string& model, const std::string& version, InferArrival& arrival);
  static void RefuseOverQuota(const common::QuotaRejection& rejection, const std::string& model,
                              const std::string& version, InferArrival& arrival);
  // The body decoded (inflated first when compressed) and admitted.
  void DecodeInfer(HttpRequest& request, const std::string& model, const std::string& version, InferArrival arrival);
  // A compressed body: its model looked up first, then inflated here up to
  // a small budget, the rest (and the decoding) on the inflate worker.
  void InflateInfer(HttpRequest& request, ContentCoding coding, const std::string& model, const std::string& version,
                    InferArrival arrival);
  // On the connection's thread: binds shared memory and hands the request to
  // its model, or answers the error. `source`: the request as it arrived,
  // which waits for the model's next load (AwaitModelLoad) instead when the
  // model was evicted since it was looked at.
  void AdmitInfer(Result<DecodedInferRequest> decoded, const std::string& model, const std::string& version,
                  InferArrival arrival, HttpRequest& source);
  static void FailInfer(const Status& status, const std::string& model, const std::string& version,
                        InferArrival& arrival);
  HttpResponse HandleModelGet(const std::string& model, const std::string& version, std::string_view action);
  HttpResponse HandleStats(const std::string& model, const std::string& version);
  // GET /v2/models/{m}[/versions/{v}]/drift[?format=profile] (DriftJson.h).
  HttpResponse HandleDrift(const HttpRequest& request, const std::string& model, const std::string& version);
  // GET /v2/models/{m}/shadow (ShadowJson.h).
  HttpResponse HandleShadow(const std::string& model);
  // The model's READY versions; the lookup's error (404) for an unknown
  // model, kInvalidArgument when none is READY.
  Result<std::vector<std::shared_ptr<Model>>> ReadyVersions(const std::string& model) const;
  HttpResponse HandleRepositoryIndex(const HttpRequest& request);
  void HandleModelControl(const std::string& model, bool load, RequestContext context);
  // Triton's logging and trace extensions (LoggingJson.h, TraceSettingJson.h).
  HttpResponse HandleLogging(const HttpRequest& request);
  HttpResponse HandleTraceSetting(const HttpRequest& request, const std::string& model);
  HttpResponse Live();
  HttpResponse Ready();
  // Counts one more thing in flight (a request waiting or inflating, a model
  // load or unload) until released; keeps the counter alive that long, as a
  // completion may run after the service is gone.
  common::InFlightHold HoldInFlight() const { return common::InFlightHold(admission_, &admission_->in_flight()); }
  // The 401/403 of a request to a restricted API group without the right
  // header; nullopt when it may go on.
  std::optional<HttpResponse> AccessRefusal(const HttpRequest& request, const std::vector<std::string>& path) const;

  HttpServiceOptions options_;
  ModelRepository* repository_;
  std::shared_ptr<common::SharedMemoryRegistry> shared_memory_;
  // Shared with the completions of the requests it admitted, which may run
  // after the service is gone (see InferAdmission's lifetime rule).
  std::shared_ptr<common::InferAdmission> admission_;
  // Last: its thread stops (dropping queued jobs) before the rest goes.
  std::unique_ptr<InflateWorker> inflate_worker_ = std::make_unique<InflateWorker>();
};

// Compresses the response in place when the client accepts gzip/deflate
// (the service does so only for an infer response that succeeded).
void CompressResponse(HttpResponse* response, std::string_view accept_encoding);

// The API group of a request path (SplitPath's output), as Triton maps it;
// nullopt for paths that are no API (answered 404).
std::optional<auth::ApiGroup> HttpApiGroup(const std::vector<std::string>& path);

// "/v2/models/a%2Fb/infer?x=1" → {"v2","models","a/b","infer"}; nullopt on a
// bad percent escape.
std::optional<std::vector<std::string>> SplitPath(std::string_view target);

}  // namespace ortserve::http
