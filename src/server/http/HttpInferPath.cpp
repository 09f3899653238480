#include "server/http/HttpService.h"

// The infer route of the HTTP front end, stage by stage: wait for an
// on-demand load, inflate (inline or on the inflate worker), decode, admit
// into the model, encode and report the answer (docs/architecture.md, "one
// HTTP infer request, stage by stage"). HttpService.cpp routes to it.
#include <limits>

#include "core/LogContext.h"

#include "server/http/Compression.h"
#include "server/http/HttpStatus.h"
#include "server/http/InferRequestDecoder.h"
#include "server/http/InferResponseEncoder.h"
#include "server/http/RawInferRequest.h"

namespace ortserve::http {
namespace {

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

}  // namespace

// A compressed infer request while its body inflates on the inflate worker:
// what the worker needs, then what it hands back to the connection's thread.
struct HttpService::InflateJob {
  // The request as it arrived: its body is what `inflater` reads, and what
  // is inflated again should its model be evicted before admission.
  HttpRequest source;
  std::unique_ptr<Inflater> inflater;
  std::shared_ptr<Model> target;
  std::string model;
  std::string version;
  InferArrival arrival;
  Result<DecodedInferRequest> decoded = Internal("the request body was not inflated");
  // Counted in flight from its hand-over until it is admitted or dropped,
  // so that shutdown waits for it as for a request inside a model.
  common::InFlightHold in_flight;
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
  // Lines logged while the request is handled on this thread carry it
  // (core/LogContext.h); its id is known once the body is decoded.
  RequestLogScope log_scope(model, version, {}, arrival.report.trace.get());
  if (Status accepting = admission_->CheckAccepting(); !accepting.ok())
    return FailInfer(accepting, model, version, arrival);
  if (admission_->AwaitsAnotherLoad(model, arrival.load_waits))
    return AwaitModelLoad(request, model, version, std::move(arrival));
  DecodeInfer(request, model, version, std::move(arrival));
}

struct HttpService::LoadWait {
  HttpRequest request;
  std::string model;
  std::string version;
  InferArrival arrival;
  // Counted in flight while it waits, so that shutdown waits for it too.
  common::InFlightHold in_flight;
};

void HttpService::AwaitModelLoad(HttpRequest& request, const std::string& model, const std::string& version,
                                 InferArrival arrival) {
  auto wait = std::make_shared<LoadWait>();
  wait->request = std::move(request);
  wait->model = model;
  wait->version = version;
  wait->arrival = std::move(arrival);
  wait->arrival.model.reset();  // it may be evicted meanwhile: looked up again after the load
  wait->in_flight = HoldInFlight();
  auto post = wait->arrival.context.post;
  repository_->WhenLoaded(model, Clock::time_point::max(), [this, wait, post](Status loaded) {
    // Back on the connection's thread (dropped when the client left).
    post([this, wait, loaded] {
      RequestLogScope log_scope(wait->model, wait->version, {}, wait->arrival.report.trace.get());
      if (!loaded.ok()) return FailInfer(loaded, wait->model, wait->version, wait->arrival);
      if (Status accepting = admission_->CheckAccepting(); !accepting.ok())
        return FailInfer(accepting, wait->model, wait->version, wait->arrival);
      if (admission_->AwaitsAnotherLoad(wait->model, wait->arrival.load_waits)) {
        return AwaitModelLoad(wait->request, wait->model, wait->version, std::move(wait->arrival));
      }
      DecodeInfer(wait->request, wait->model, wait->version, std::move(wait->arrival));
    });
  });
}

bool HttpService::CheckQuotaEarly(const std::string& model, const std::string& version, InferArrival& arrival) {
  if (!admission_->quotas() || arrival.quota.acquired) return true;
  common::InferAdmission::QuotaCheck quota{.client = arrival.client_id, .rejection = {}};
  if (!admission_->CheckQuotaEarly(model, version, &quota).ok()) {
    RefuseOverQuota(*quota.rejection, model, version, arrival);
    return false;
  }
  arrival.quota = std::move(quota.admitted);
  arrival.model = std::move(quota.model);
  return true;
}

void HttpService::RefuseOverQuota(const common::QuotaRejection& rejection, const std::string& model,
                                  const std::string& version, InferArrival& arrival) {
  HttpResponse r = ErrorResponse(429, rejection.message);
  r.retry_after_s = rejection.retry_after_s;
  r.pause_reading = rejection.pause;
  if (arrival.report) ReportInfer(arrival.report, {}, model, version, r, arrival.bytes_in, nullptr);
  arrival.context.reply(std::move(r));
}

void HttpService::DecodeInfer(HttpRequest& request, const std::string& model, const std::string& version,
                              InferArrival arrival) {
  // Over quota: refused before any decoding or inflating.
  if (!CheckQuotaEarly(model, version, arrival)) return;
  auto coding = ParseContentEncoding(request.content_encoding);
  if (!coding.ok()) return FailInfer(coding.status(), model, version, arrival);
  if (*coding != ContentCoding::kIdentity) return InflateInfer(request, *coding, model, version, std::move(arrival));
  auto decoded = DecodeInferBody(request.body, request.inference_header_length, options_, *repository_, model,
                                 version, arrival.model);
  AdmitInfer(std::move(decoded), model, version, std::move(arrival), request);
}

void HttpService::InflateInfer(HttpRequest& request, ContentCoding coding, const std::string& model,
                               const std::string& version, InferArrival arrival) {
  // The model first: a request for one that is not there costs no inflating.
  // The quota check may have found it already.
  Result<std::shared_ptr<Model>> target =
      arrival.model && arrival.model->ready() ? arrival.model : repository_->GetModel(model, version);
  if (!target.ok()) {
    if (admission_->AwaitsAnotherLoad(model, arrival.load_waits))
      return AwaitModelLoad(request, model, version, std::move(arrival));
    return FailInfer(target.status(), model, version, arrival);
  }
  auto inflater = Inflater::Start(coding, *request.body, options_.max_input_size);
  if (!inflater.ok()) return FailInfer(inflater.status(), model, version, arrival);
  auto done = (*inflater)->Run(kInlineInflateBytes);
  if (!done.ok()) return FailInfer(done.status(), model, version, arrival);
  if (*done) {
    auto body = std::make_shared<const std::string>((*inflater)->TakeOutput());
    return AdmitInfer(DecodeInferBody(std::move(body), request.inference_header_length, options_, *repository_,
                                      model, version, std::move(target).value()),
                      model, version, std::move(arrival), request);
  }
  auto job = std::make_shared<InflateJob>();
  job->inflater = std::move(inflater).value();
  job->source = std::move(request);
  job->target = std::move(target).value();
  job->model = model;
  job->version = version;
  job->arrival = std::move(arrival);
  job->in_flight = HoldInFlight();
  // Dropped unrun when the client leaves first: nobody waits for the answer.
  inflate_worker_->Submit(job->arrival.context.cancelled, [this, job] {
    RequestLogScope log_scope(job->model, job->version, {}, job->arrival.report.trace.get());
    auto finished = job->inflater->Run(std::numeric_limits<size_t>::max());
    if (finished.ok()) {
      auto body = std::make_shared<const std::string>(job->inflater->TakeOutput());
      job->decoded = DecodeInferBody(std::move(body), job->source.inference_header_length, options_, *repository_,
                                     job->model, job->version, job->target);
    } else {
      job->decoded = finished.status();
    }
    job->inflater.reset();
    job->target.reset();
    // Admission happens on the connection's thread, as for every request;
    // the service outlives a connection that still runs what it posts.
    job->arrival.context.post([this, job] {
      RequestLogScope log_scope(job->model, job->version, {}, job->arrival.report.trace.get());
      if (Status accepting = admission_->CheckAccepting(); !accepting.ok())
        return FailInfer(accepting, job->model, job->version, job->arrival);
      AdmitInfer(std::move(job->decoded), job->model, job->version, std::move(job->arrival), job->source);
    });
  });
}

void HttpService::AdmitInfer(Result<DecodedInferRequest> decoded, const std::string& model,
                             const std::string& version, InferArrival arrival, HttpRequest& source) {
  // Evicted (memory budget) since it was looked at: the request decodes
  // again after the model's next load.
  auto fail_or_wait = [&](const Status& failed) {
    if (admission_->AwaitsAnotherLoad(model, arrival.load_waits))
      return AwaitModelLoad(source, model, version, std::move(arrival));
    FailInfer(failed, model, version, arrival);
  };
  if (!decoded.ok()) return fail_or_wait(decoded.status());

  InferenceRequest& req = *decoded->request;
  RequestLogScope log_scope(model, version, req.id, arrival.report.trace.get());
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
  // A copy while the request may still wait for a load (fail_or_wait).
  CancelFlag cancelled = arrival.context.cancelled;
  const uint64_t bytes_in = arrival.bytes_in;
  common::InferAdmission::QuotaCheck quota{.client = arrival.client_id, .rejection = {},
                                           .admitted = arrival.quota,  // kept should it wait for a load
                                           .model = std::move(arrival.model)};
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
        const InferenceResponse* answered = shared->ok() ? &shared->value() : nullptr;
        RequestLogScope log_scope(answered ? answered->model_name : model, answered ? answered->model_version : version,
                                  answered ? answered->id : id, report.trace.get());
        HttpResponse r = EncodeInferResult(*shared, listed, binary_default, accept, shm_outputs.get());
        if (report) {
          ReportInfer(report, id, model, version, r, bytes_in, answered);
        }
        reply(std::move(r));
      });
    };
  }, admission_->quotas() ? &quota : nullptr);
  if (quota.rejection) return RefuseOverQuota(*quota.rejection, model, version, arrival);
  if (!admitted.ok()) return fail_or_wait(admitted);
}

}  // namespace ortserve::http
