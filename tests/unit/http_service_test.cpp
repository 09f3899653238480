// HttpService (routing, metadata/config/stats/index JSON, infer round trips)
// against a fake repository, without sockets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "fakes/FakeModel.h"
#include "fakes/FakeRepository.h"
#include "server/http/Compression.h"
#include "server/http/HttpService.h"

namespace ortserve::http {
namespace {

using ::testing::HasSubstr;

// "simple": INT32 INPUT0 -> OUT_INPUT0, [-1,16], dynamic batching; every
// input echoed on the caller's thread unless the test holds requests.
std::shared_ptr<FakeModel> SimpleModel() {
  inference::ModelConfig config;
  config.set_platform("onnxruntime_onnx");
  config.set_max_batch_size(8);
  auto* in = config.add_input();
  in->set_name("INPUT0");
  in->set_data_type(inference::TYPE_INT32);
  in->add_dims(16);
  auto* out = config.add_output();
  out->set_name("OUT_INPUT0");
  out->set_data_type(inference::TYPE_INT32);
  out->add_dims(16);
  config.mutable_dynamic_batching()->set_max_queue_delay_microseconds(100);
  return std::make_shared<FakeModel>(FakeModel::Options{
      .name = "simple", .config = std::move(config), .no_inputs_message = "model 'simple' expects 1 input"});
}

// "simple", and "broken" (unavailable: bad config); not every model ready.
// With `evict_after_check` set, "simple" loads on demand and plays the race
// of a memory budget: the arrival's NeedsLoad finds it loaded, and it is
// evicted right after, until a load (WhenLoaded, answered at once) brings it
// back. Single-threaded tests only.
struct SimpleRepository : FakeRepository {
  SimpleRepository() {
    Add(model);
    AddUnavailable("broken", "", "bad config");
    all_ready = false;
  }
  Result<std::shared_ptr<Model>> GetModel(const std::string& name, const std::string& version) const override {
    if (name == "simple" && evicted) return Unavailable("Request for unknown model: 'simple' is not loaded");
    return FakeRepository::GetModel(name, version);
  }
  bool NeedsLoad(const std::string& name) const override {
    if (name != "simple") return false;
    const bool needs = evicted;
    if (evict_after_check) evicted = true;
    evict_after_check = false;
    return needs;
  }
  void WhenLoaded(const std::string& /*name*/, Clock::time_point /*deadline*/,
                  std::function<void(Status)> done) override {
    ++on_demand_loads;
    evicted = false;
    done(Status::Ok());
  }
  std::shared_ptr<FakeModel> model = SimpleModel();
  mutable bool evict_after_check = false;
  mutable bool evicted = false;
  int on_demand_loads = 0;
};

HttpRequest Req(std::string method, std::string target) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}

class HttpServiceTest : public ::testing::Test {
 protected:
  // Runs a request; posted work runs from `queue` when Drain() is called,
  // like a connection strand would. `wait`: also waits (within a generous
  // bound) for work posted from another thread (the inflate worker) until
  // the reply comes.
  std::optional<HttpResponse> Call(HttpRequest req, bool wait = false) {
    std::optional<HttpResponse> out;
    RequestContext ctx;
    ctx.post = [this](std::function<void()> fn) { PostWork(std::move(fn)); };
    ctx.reply = [&out, this](HttpResponse r) {
      ++replies;
      last = r;
      out = std::move(r);
    };
    ctx.cancelled = std::make_shared<CancelToken>();
    service.Handle(std::move(req), ctx);
    Drain();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (wait && !out && std::chrono::steady_clock::now() < deadline) {
      {
        std::unique_lock lock(queue_mu);
        queue_cv.wait_until(lock, deadline, [this] { return !queue.empty(); });
      }
      Drain();
    }
    return out ? out : std::nullopt;
  }
  // Any thread; records whether work came from a thread other than the test's.
  void PostWork(std::function<void()> fn) {
    {
      std::lock_guard lock(queue_mu);
      queue.push_back(std::move(fn));
      if (std::this_thread::get_id() != test_thread) posted_from_another_thread = true;
    }
    queue_cv.notify_all();
  }
  void Drain() {
    while (true) {
      std::function<void()> fn;
      {
        std::lock_guard lock(queue_mu);
        if (queue.empty()) return;
        fn = std::move(queue.front());
        queue.pop_front();
      }
      fn();
    }
  }
  HttpResponse Get(const std::string& target) {
    auto r = Call(Req("GET", target));
    EXPECT_TRUE(r.has_value());
    return r.value_or(HttpResponse{});
  }
  HttpResponse Post(const std::string& target, std::string body, std::optional<std::string> header_length = {},
                    std::string content_encoding = "", std::string accept = "", bool wait = false) {
    HttpRequest req = Req("POST", target);
    *req.body = std::move(body);
    req.inference_header_length = std::move(header_length);
    req.content_encoding = std::move(content_encoding);
    req.accept_encoding = std::move(accept);
    auto r = Call(std::move(req), wait);
    EXPECT_TRUE(r.has_value());
    return r.value_or(HttpResponse{});
  }

  SimpleRepository repo;
  HttpService service{{.max_input_size = 1 << 20, .strict_readiness = false, .server_version = "1.2.3"}, &repo};
  std::mutex queue_mu;
  std::condition_variable queue_cv;
  std::deque<std::function<void()>> queue;  // guarded by queue_mu
  bool posted_from_another_thread = false;  // guarded by queue_mu
  const std::thread::id test_thread = std::this_thread::get_id();
  int replies = 0;
  HttpResponse last;
};

rapidjson::Document Parse(const std::string& s) {
  rapidjson::Document d;
  d.Parse(s.data(), s.size());
  EXPECT_FALSE(d.HasParseError()) << s;
  return d;
}

TEST_F(HttpServiceTest, ServerMetadataAndHealth) {
  auto r = Get("/v2");
  EXPECT_EQ(r.status, 200u);
  auto d = Parse(r.body);
  EXPECT_STREQ(d["name"].GetString(), "ortserve");
  EXPECT_STREQ(d["version"].GetString(), "1.2.3");
  EXPECT_THAT(r.body, HasSubstr("binary_tensor_data"));
  EXPECT_EQ(Get("/v2/health/live").status, 200u);
  EXPECT_EQ(Get("/v2/health/ready").status, 200u);
  service.StopAccepting();
  EXPECT_EQ(Get("/v2/health/ready").status, 400u);
  EXPECT_EQ(Get("/v2/health/live").status, 200u);
}

TEST_F(HttpServiceTest, StrictReadinessNeedsEveryModel) {
  HttpService strict({.max_input_size = 1024, .strict_readiness = true, .server_version = ""}, &repo);
  std::optional<HttpResponse> out;
  RequestContext ctx;
  ctx.post = [](std::function<void()> f) { f(); };
  ctx.reply = [&](HttpResponse r) { out = r; };
  strict.Handle(Req("GET", "/v2/health/ready"), ctx);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->status, 400u);
  EXPECT_THAT(out->body, HasSubstr("strict readiness"));
}

TEST_F(HttpServiceTest, NotFoundAndMethodNotAllowed) {
  auto r = Get("/v3/foo");
  EXPECT_EQ(r.status, 404u);
  EXPECT_THAT(r.body, HasSubstr(R"({"error":"no such endpoint: /v3/foo"})"));
  EXPECT_EQ(Get("/v2/models/simple/nonsense").status, 404u);
  EXPECT_EQ(Get("/v2/models/simple/infer").status, 405u);
  EXPECT_EQ(Post("/v2/health/live", "").status, 405u);
  EXPECT_EQ(Get("/v2/repository/index").status, 405u);
  EXPECT_EQ(Get("/v2/models/bad%zzname").status, 400u);
  // Model control mode none (the fake's default): refused as Triton does.
  auto load = Post("/v2/repository/models/simple/load", "");
  EXPECT_EQ(load.status, 400u);
  EXPECT_THAT(load.body, HasSubstr("explicit model load / unload is not allowed"));
}

TEST_F(HttpServiceTest, ModelMetadataPrependsTheBatchDimension) {
  auto r = Get("/v2/models/simple");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body,
            R"({"name":"simple","versions":["1"],"platform":"onnxruntime_onnx",)"
            R"("inputs":[{"name":"INPUT0","datatype":"INT32","shape":[-1,16]}],)"
            R"("outputs":[{"name":"OUT_INPUT0","datatype":"INT32","shape":[-1,16]}]})");
  EXPECT_EQ(Get("/v2/models/simple/versions/1").status, 200u);
  auto unknown = Get("/v2/models/nope");
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_THAT(unknown.body, HasSubstr("Request for unknown model: 'nope' is not found"));
  EXPECT_EQ(Get("/v2/models/broken").status, 503u);
}

TEST_F(HttpServiceTest, ModelReady) {
  EXPECT_EQ(Get("/v2/models/simple/ready").status, 200u);
  EXPECT_EQ(Get("/v2/models/simple/versions/1/ready").status, 200u);
  // As Triton: any other version of a model it knows is 400 (not ready); a
  // model name it does not know is 404.
  const HttpResponse unknown_version = Get("/v2/models/simple/versions/2/ready");
  EXPECT_EQ(unknown_version.status, 400u);
  EXPECT_THAT(unknown_version.body, HasSubstr("Request for unknown model: 'simple' version 2 is not found"));
  EXPECT_EQ(Get("/v2/models/simple/versions/abc/ready").status, 404u);
  EXPECT_EQ(Get("/v2/models/nope/ready").status, 404u);
  EXPECT_EQ(Get("/v2/models/nope/versions/2/ready").status, 404u);
  const HttpResponse not_ready = Get("/v2/models/broken/ready");
  EXPECT_EQ(not_ready.status, 400u);
  EXPECT_THAT(not_ready.body, HasSubstr("Request for unknown model: 'broken' has no available versions: "));
}

TEST_F(HttpServiceTest, ConfigPrintsInt64AsNumbersAndDefaults) {
  auto r = Get("/v2/models/simple/config");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto d = Parse(r.body);
  EXPECT_EQ(d["max_batch_size"].GetInt(), 8);
  ASSERT_TRUE(d["input"][0]["dims"][0].IsInt64()) << r.body;
  EXPECT_EQ(d["input"][0]["dims"][0].GetInt64(), 16);
  EXPECT_STREQ(d["input"][0]["data_type"].GetString(), "TYPE_INT32");
  ASSERT_TRUE(d["dynamic_batching"]["max_queue_delay_microseconds"].IsUint64()) << r.body;
  EXPECT_EQ(d["dynamic_batching"]["max_queue_delay_microseconds"].GetUint64(), 100u);
  EXPECT_TRUE(d.HasMember("backend"));  // default values are printed
  EXPECT_TRUE(d["instance_group"].IsArray());
}

TEST_F(HttpServiceTest, Statistics) {
  auto& st = repo.model->stats();
  st.inference_count = 5;
  st.execution_count = 2;
  st.success.Add(1000, 5);
  st.ForBatchSize(4)->compute_infer.Add(300);
  auto r = Get("/v2/models/simple/stats");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto d = Parse(r.body);
  const auto& m = d["model_stats"][0];
  EXPECT_STREQ(m["name"].GetString(), "simple");
  EXPECT_STREQ(m["version"].GetString(), "1");
  EXPECT_EQ(m["inference_count"].GetUint64(), 5u);
  EXPECT_EQ(m["inference_stats"]["success"]["count"].GetUint64(), 5u);
  EXPECT_EQ(m["inference_stats"]["success"]["ns"].GetUint64(), 1000u);
  EXPECT_TRUE(m["inference_stats"].HasMember("cache_miss"));
  ASSERT_EQ(m["batch_stats"].Size(), 1u);
  EXPECT_EQ(m["batch_stats"][0]["batch_size"].GetUint64(), 4u);
  EXPECT_EQ(m["batch_stats"][0]["compute_infer"]["ns"].GetUint64(), 300u);
  EXPECT_EQ(Get("/v2/models/stats").status, 200u);
  EXPECT_EQ(Get("/v2/models/nope/stats").status, 404u);
  EXPECT_EQ(Get("/v2/models/nope/versions/2/stats").status, 404u);
  EXPECT_EQ(Get("/v2/models/nope/config").status, 404u);
  // As Triton: a version of a known model that is not ready has no statistics.
  const HttpResponse other = Get("/v2/models/simple/versions/2/stats");
  EXPECT_EQ(other.status, 400u);
  EXPECT_THAT(other.body, HasSubstr("requested model version is not available for model 'simple' (Request for "
                                    "unknown model: 'simple' version 2 is not found)"));
}

// A statistics read that lands between the scheduler's adds to the three
// compute counters still reports one count for all three: perf_analyzer
// aborts on differing compute counts.
TEST_F(HttpServiceTest, StatisticsComputeCountsAgreeMidUpdate) {
  auto& st = repo.model->stats();
  st.compute_input.Add(3000, 3);  // a batch of 3 is half recorded:
  st.compute_infer.Add(800, 2);   // input counted, infer and output not yet
  st.compute_output.Add(200, 2);
  st.ForBatchSize(3)->compute_input.Add(100);
  st.ForBatchSize(3)->compute_infer.Add(400);
  auto r = Get("/v2/models/simple/stats");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto d = Parse(r.body);
  const auto& m = d["model_stats"][0];
  for (const char* name : {"compute_input", "compute_infer", "compute_output"}) {
    EXPECT_EQ(m["inference_stats"][name]["count"].GetUint64(), 2u) << name;
  }
  EXPECT_EQ(m["inference_stats"]["compute_input"]["ns"].GetUint64(), 3000u);
  ASSERT_EQ(m["batch_stats"].Size(), 1u);
  for (const char* name : {"compute_input", "compute_infer", "compute_output"}) {
    EXPECT_EQ(m["batch_stats"][0][name]["count"].GetUint64(), 0u) << name;
  }
}

TEST_F(HttpServiceTest, RepositoryIndex) {
  auto all = Post("/v2/repository/index", "");
  ASSERT_EQ(all.status, 200u);
  EXPECT_EQ(all.body,
            R"([{"name":"broken","state":"UNAVAILABLE","reason":"bad config"},)"
            R"({"name":"simple","version":"1","state":"READY"}])");
  auto ready = Post("/v2/repository/index", R"({"ready":true})");
  EXPECT_EQ(ready.body, R"([{"name":"simple","version":"1","state":"READY"}])");
  EXPECT_EQ(Post("/v2/repository/index", "{").status, 400u);
}

constexpr const char* kInferJson =
    R"({"id":"7","inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,2],"data":[[3,4]]}]})";

TEST_F(HttpServiceTest, InferJsonRoundTrip) {
  auto r = Post("/v2/models/simple/infer", kInferJson);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body,
            R"({"model_name":"simple","model_version":"1","id":"7","outputs":[)"
            R"({"name":"OUT_INPUT0","datatype":"INT32","shape":[1,2],"data":[3,4]}]})");
  EXPECT_FALSE(r.inference_header_length);
  EXPECT_EQ(service.in_flight()->count(), 0);
}

TEST_F(HttpServiceTest, AModelEvictedAfterTheArrivalCheckIsLoadedAgainForTheRequest) {
  repo.evict_after_check = true;
  auto r = Post("/v2/models/simple/infer", kInferJson);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("data":[3,4])"));
  EXPECT_EQ(repo.on_demand_loads, 1);
  // Compressed: the lookup before inflating finds it evicted.
  repo.evict_after_check = true;
  auto gz = Compress(ContentCoding::kGzip, {kInferJson});
  auto c = Post("/v2/models/simple/infer", *gz, std::nullopt, "gzip");
  ASSERT_EQ(c.status, 200u) << c.body;
  EXPECT_EQ(repo.on_demand_loads, 2);
  EXPECT_EQ(service.in_flight()->count(), 0);
}

TEST_F(HttpServiceTest, InferBinaryRoundTripIsZeroCopy) {
  const std::string json =
      R"({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,2],"parameters":{"binary_data_size":8}}],)"
      R"("outputs":[{"name":"OUT_INPUT0","parameters":{"binary_data":true}}]})";
  const int32_t values[2] = {11, -12};
  std::string body = json;
  body.append(reinterpret_cast<const char*>(values), 8);
  auto r = Post("/v2/models/simple/infer", body, std::to_string(json.size()));
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_TRUE(r.inference_header_length);
  EXPECT_EQ(*r.inference_header_length, r.body.size());
  EXPECT_THAT(r.body, HasSubstr(R"("parameters":{"binary_data_size":8})"));
  ASSERT_EQ(r.tail.size(), 1u);
  ASSERT_EQ(r.tail[0].size(), 8u);
  EXPECT_EQ(std::memcmp(r.tail[0].data(), values, 8), 0);
  EXPECT_EQ(r.content_type, "application/octet-stream");
}

TEST_F(HttpServiceTest, InferCompletesLaterOnThePostedQueue) {
  repo.model->set_hold(true);
  HttpRequest req = Req("POST", "/v2/models/simple/infer");
  *req.body = kInferJson;
  std::optional<HttpResponse> out;
  RequestContext ctx;
  ctx.post = [this](std::function<void()> fn) { PostWork(std::move(fn)); };
  ctx.reply = [&](HttpResponse r) { out = std::move(r); };
  service.Handle(std::move(req), ctx);
  EXPECT_FALSE(out);
  EXPECT_EQ(service.in_flight()->count(), 1);
  EXPECT_FALSE(service.in_flight()->WaitForZero(std::chrono::milliseconds(1)));
  // The model completes on "another thread": nothing is encoded until the
  // connection's queue runs.
  repo.model->Answer(*repo.model->TakeHeld());
  EXPECT_FALSE(out);
  EXPECT_TRUE(service.in_flight()->WaitForZero(std::chrono::milliseconds(1)));
  Drain();
  ASSERT_TRUE(out);
  EXPECT_EQ(out->status, 200u);
}

TEST_F(HttpServiceTest, InferErrorsMapToStatusCodes) {
  auto unknown = Post("/v2/models/nope/infer", kInferJson);
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_THAT(unknown.body, HasSubstr("Request for unknown model: 'nope' is not found"));
  EXPECT_EQ(Post("/v2/models/broken/infer", kInferJson).status, 503u);
  auto model_level = Post("/v2/models/simple/infer", R"({"inputs":[]})");
  EXPECT_EQ(model_level.status, 400u);
  EXPECT_THAT(model_level.body, HasSubstr("expects 1 input"));
  auto bad_json = Post("/v2/models/simple/infer", R"({"inputs":)");
  EXPECT_EQ(bad_json.status, 400u);
  EXPECT_THAT(bad_json.body, HasSubstr("malformed request JSON"));
  auto br = Post("/v2/models/simple/infer", kInferJson, std::nullopt, "br");
  EXPECT_EQ(br.status, 501u);
  EXPECT_THAT(br.body, HasSubstr("unsupported Content-Encoding: br"));
  service.StopAccepting();
  EXPECT_EQ(Post("/v2/models/simple/infer", kInferJson).status, 503u);
}

TEST_F(HttpServiceTest, CompressedRequestAndResponse) {
  auto gz = Compress(ContentCoding::kGzip, {kInferJson});
  auto r = Post("/v2/models/simple/infer", *gz, std::nullopt, "gzip", "gzip");
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.content_encoding, "gzip");
  auto plain = Decompress(ContentCoding::kGzip, r.body, 1 << 20);
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(*plain, HasSubstr(R"("data":[3,4])"));
  // A bomb in the body: 400 (as Triton) naming the limit, not an out-of-memory.
  const std::string zeros(4 << 20, ' ');
  auto bomb = Compress(ContentCoding::kGzip, {zeros});
  auto b = Post("/v2/models/simple/infer", *bomb, std::nullopt, "gzip", "", /*wait=*/true);
  EXPECT_EQ(b.status, 400u);
  EXPECT_THAT(b.body, HasSubstr("exceeds the maximum allowed value of 1048576 bytes"));
}

TEST_F(HttpServiceTest, CompressedBodyForAModelThatIsNotThereIsNotInflated) {
  // Not even looked at: the answer is the model's, not "corrupt gzip".
  auto unknown = Post("/v2/models/nope/infer", "this is not gzip", std::nullopt, "gzip");
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_THAT(unknown.body, HasSubstr("Request for unknown model: 'nope' is not found"));
  EXPECT_EQ(Post("/v2/models/broken/infer", "this is not gzip", std::nullopt, "deflate").status, 503u);
  EXPECT_THAT(Post("/v2/models/simple/infer", "this is not gzip", std::nullopt, "gzip").body,
              HasSubstr("corrupt gzip request body"));
}

TEST_F(HttpServiceTest, LargeCompressedBodyIsInflatedOffTheConnectionsThread) {
  // A small one inflates inline: no hop.
  auto small = Compress(ContentCoding::kGzip, {kInferJson});
  EXPECT_EQ(Post("/v2/models/simple/infer", *small, std::nullopt, "gzip").status, 200u);
  EXPECT_FALSE(posted_from_another_thread);
  // 600 KB of JSON (the request padded with spaces): inflated and decoded on
  // the inflate worker, then admitted here.
  const std::string padded = std::string(kInferJson) + std::string(600 << 10, ' ');
  auto large = Compress(ContentCoding::kDeflate, {padded});
  auto r = Post("/v2/models/simple/infer", *large, std::nullopt, "deflate", "", /*wait=*/true);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("data":[3,4])"));
  EXPECT_TRUE(posted_from_another_thread);
  EXPECT_TRUE(service.in_flight()->WaitForZero(std::chrono::seconds(30)));
}

// As Triton: clients that send Accept-Encoding without decompressing
// (tritonclient.http.aio) must read every other answer as it is.
TEST_F(HttpServiceTest, OnlySuccessfulInferResponsesAreCompressed) {
  for (const char* target : {"/v2", "/v2/health/live", "/v2/health/ready", "/v2/models/simple",
                             "/v2/models/simple/versions/1", "/v2/models/simple/config", "/v2/models/simple/ready",
                             "/v2/models/simple/stats", "/v2/models/stats", "/v2/models/nope", "/v2/nope"}) {
    HttpRequest req = Req("GET", target);
    req.accept_encoding = "gzip, deflate";
    const std::optional<HttpResponse> r = Call(std::move(req));
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->content_encoding, "") << target;
  }
  EXPECT_EQ(Post("/v2/repository/index", "{}", std::nullopt, "", "gzip").content_encoding, "");
  const HttpResponse refused = Post("/v2/models/simple/infer", R"({"inputs":[]})", std::nullopt, "", "gzip");
  EXPECT_EQ(refused.status, 400u);
  EXPECT_EQ(refused.content_encoding, "");
  EXPECT_THAT(refused.body, HasSubstr("expects 1 input"));
  EXPECT_EQ(Post("/v2/models/simple/infer", kInferJson, std::nullopt, "", "gzip").content_encoding, "gzip");
  EXPECT_EQ(Post("/v2/models/simple/versions/1/infer", kInferJson, std::nullopt, "", "deflate").content_encoding,
            "deflate");
}

TEST_F(HttpServiceTest, BinaryOutputCompressedKeepsJsonLength) {
  const std::string body = R"({"parameters":{"binary_data_output":true},)"
                           R"("inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,2],"data":[1,2]}]})";
  auto r = Post("/v2/models/simple/infer", body, std::nullopt, "", "deflate");
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.content_encoding, "deflate");
  ASSERT_TRUE(r.inference_header_length);
  auto plain = Decompress(ContentCoding::kDeflate, r.body, 1 << 20);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->size(), *r.inference_header_length + 8);
}

}  // namespace
}  // namespace ortserve::http
