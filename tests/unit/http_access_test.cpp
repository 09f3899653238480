// HTTP access control: the API group of each route, restricted groups
// (401/403 with one generic message), and explicit model control refused
// unless authenticated or explicitly allowed. HttpService without sockets.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fakes/FakeRepository.h"
#include "server/http/HttpService.h"

namespace ortserve::http {
namespace {

using auth::ApiGroup;
using ::testing::HasSubstr;
using ::testing::Not;

std::optional<ApiGroup> GroupOf(std::string_view target) { return HttpApiGroup(*SplitPath(target)); }

TEST(HttpApiGroupTest, MapsRoutesAsTriton) {
  EXPECT_EQ(GroupOf("/v2"), ApiGroup::kMetadata);
  EXPECT_EQ(GroupOf("/v2/health/live"), ApiGroup::kHealth);
  EXPECT_EQ(GroupOf("/v2/health/ready"), ApiGroup::kHealth);
  EXPECT_EQ(GroupOf("/v2/models/m/ready"), ApiGroup::kHealth);
  EXPECT_EQ(GroupOf("/v2/models/m/versions/2/ready"), ApiGroup::kHealth);
  EXPECT_EQ(GroupOf("/v2/models/m"), ApiGroup::kMetadata);
  EXPECT_EQ(GroupOf("/v2/models/m/versions/2"), ApiGroup::kMetadata);
  EXPECT_EQ(GroupOf("/v2/models/m/config"), ApiGroup::kModelConfig);
  EXPECT_EQ(GroupOf("/v2/models/m/infer?x=1"), ApiGroup::kInference);
  EXPECT_EQ(GroupOf("/v2/models/m/versions/1/infer"), ApiGroup::kInference);
  EXPECT_EQ(GroupOf("/v2/models/m/generate"), ApiGroup::kInference);
  EXPECT_EQ(GroupOf("/v2/models/stats"), ApiGroup::kStatistics);
  EXPECT_EQ(GroupOf("/v2/models/m/stats"), ApiGroup::kStatistics);
  EXPECT_EQ(GroupOf("/v2/models/m/versions/1/stats"), ApiGroup::kStatistics);
  EXPECT_EQ(GroupOf("/v2/repository/index"), ApiGroup::kModelRepository);
  EXPECT_EQ(GroupOf("/v2/repository/models/m/load"), ApiGroup::kModelRepository);
  EXPECT_EQ(GroupOf("/v2/repository/models/m/unload"), ApiGroup::kModelRepository);
  EXPECT_EQ(GroupOf("/v2/systemsharedmemory/status"), ApiGroup::kSharedMemory);
  EXPECT_EQ(GroupOf("/v2/cudasharedmemory/region/r/register"), ApiGroup::kSharedMemory);
  EXPECT_EQ(GroupOf("/v2/trace/setting"), ApiGroup::kTrace);
  EXPECT_EQ(GroupOf("/v2/models/m/trace/setting"), ApiGroup::kTrace);
  EXPECT_EQ(GroupOf("/v2/models/m/trace"), std::nullopt);  // no such route
  EXPECT_EQ(GroupOf("/v2/logging"), ApiGroup::kLogging);
  EXPECT_EQ(GroupOf("/metrics"), std::nullopt);
  EXPECT_EQ(GroupOf("/v2/models/m/whatever"), std::nullopt);
  // A model literally called "stats" is reachable with a version.
  EXPECT_EQ(GroupOf("/v2/models/stats/versions/1/infer"), ApiGroup::kInference);
}

// No models; explicit model control, every load and unload succeeding.
struct ExplicitRepository : FakeRepository {
  ExplicitRepository() { set_control_mode(ModelControlMode::kExplicit); }
};

class HttpAccessTest : public ::testing::Test {
 protected:
  void MakeService(std::vector<std::string> specs, bool allow_model_control = false) {
    auto policy = auth::AccessPolicy::Parse(specs, auth::Protocol::kHttp);
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    service = std::make_unique<HttpService>(
        HttpServiceOptions{.server_version = "1",
                           .access_policy = std::make_shared<const auth::AccessPolicy>(std::move(*policy)),
                           .allow_unauthenticated_model_control = allow_model_control},
        &repository);
  }

  HttpResponse Call(std::string method, std::string target,
                    std::vector<std::pair<std::string, std::string>> headers = {}) {
    HttpRequest req;
    req.method = std::move(method);
    req.target = std::move(target);
    req.auth_headers = std::move(headers);
    std::optional<HttpResponse> out;
    RequestContext ctx;
    ctx.post = [](std::function<void()> fn) { fn(); };
    ctx.reply = [&out](HttpResponse r) { out = std::move(r); };
    ctx.cancelled = std::make_shared<CancelToken>();
    service->Handle(std::move(req), ctx);
    EXPECT_TRUE(out.has_value());
    return out.value_or(HttpResponse{});
  }

  ExplicitRepository repository;
  std::unique_ptr<HttpService> service;
};

TEST_F(HttpAccessTest, RestrictedGroupNeedsTheExactHeaderValue) {
  MakeService({"inference,statistics:infer-key=s3cret"});
  const HttpResponse missing = Call("POST", "/v2/models/m/infer");
  EXPECT_EQ(missing.status, 401u);
  const HttpResponse wrong = Call("POST", "/v2/models/m/infer", {{"infer-key", "s3crex"}});
  EXPECT_EQ(wrong.status, 403u);
  const HttpResponse longer = Call("GET", "/v2/models/stats", {{"infer-key", "s3cret!"}});
  EXPECT_EQ(longer.status, 403u);
  // Triton's words, naming the header and never the value.
  EXPECT_THAT(missing.body, HasSubstr("This API is restricted, expecting header 'infer-key'; the request does not"));
  EXPECT_THAT(wrong.body, HasSubstr("This API is restricted, expecting header 'infer-key'; the request carries it"));
  EXPECT_THAT(missing.body, Not(HasSubstr("s3cret")));
  EXPECT_THAT(wrong.body, Not(HasSubstr("s3cre")));
  // The right value gets through to routing (the model does not exist: 400).
  EXPECT_EQ(Call("POST", "/v2/models/m/infer", {{"infer-key", "s3cret"}}).status, 400u);
  EXPECT_EQ(Call("GET", "/v2/models/stats", {{"infer-key", "s3cret"}}).status, 200u);
  // Checked before the method: a restricted route does not even say 405.
  EXPECT_EQ(Call("GET", "/v2/models/m/infer").status, 401u);
  // Other groups stay open.
  EXPECT_EQ(Call("GET", "/v2/health/live").status, 200u);
  EXPECT_EQ(Call("GET", "/v2").status, 200u);
  EXPECT_EQ(Call("POST", "/v2/repository/index").status, 200u);
  EXPECT_EQ(Call("GET", "/nope").status, 404u);
}

TEST_F(HttpAccessTest, ExplicitModelControlIsRefusedByDefault) {
  MakeService({});
  const HttpResponse r = Call("POST", "/v2/repository/models/m/load");
  EXPECT_EQ(r.status, 403u);
  EXPECT_THAT(r.body, HasSubstr("--allow-unauthenticated-model-control"));
  EXPECT_EQ(Call("POST", "/v2/repository/models/m/unload").status, 403u);
  EXPECT_EQ(repository.loads, 0);
  EXPECT_EQ(Call("POST", "/v2/repository/index").status, 200u);  // read-only, stays open
}

TEST_F(HttpAccessTest, ExplicitModelControlAllowedByFlag) {
  MakeService({}, /*allow_model_control=*/true);
  EXPECT_EQ(Call("POST", "/v2/repository/models/m/load").status, 200u);
  EXPECT_EQ(repository.loads, 1);
}

TEST_F(HttpAccessTest, ExplicitModelControlAllowedWithRepositoryKey) {
  MakeService({"model-repository:admin-key=k"});
  EXPECT_EQ(Call("POST", "/v2/repository/models/m/load").status, 401u);
  EXPECT_EQ(Call("POST", "/v2/repository/index").status, 401u);
  EXPECT_EQ(Call("POST", "/v2/repository/models/m/load", {{"admin-key", "nope"}}).status, 403u);
  EXPECT_EQ(repository.loads, 0);
  EXPECT_EQ(Call("POST", "/v2/repository/models/m/load", {{"admin-key", "k"}}).status, 200u);
  EXPECT_EQ(repository.loads, 1);
}

}  // namespace
}  // namespace ortserve::http
