// The infer admission step both front ends share: who calls `done`, when a
// request counts in flight, what a failed lookup leaves untouched, and the
// refusal after StopAccepting.
#include <gtest/gtest.h>

#include <optional>

#include "fakes/FakeModel.h"
#include "fakes/FakeRepository.h"
#include "server/common/InferAdmission.h"
#include "server/common/Liveness.h"
#include "server/common/Readiness.h"

namespace ortserve::common {
namespace {

std::unique_ptr<InferenceRequest> RequestFor(const std::string& model, bool with_input = true) {
  auto request = std::make_unique<InferenceRequest>();
  request->model_name = model;
  request->id = "r1";
  if (with_input) {
    request->inputs.push_back(Tensor{"x", DataType::kInt32, {1}, TensorData::Copy("\x01\0\0\0", 4)});
  }
  return request;
}

class InferAdmissionTest : public ::testing::Test {
 protected:
  InferAdmissionTest() {
    model->set_hold(true);
    repository.Add(model);
    repository.AddUnavailable("broken", "1", "bad config");
  }

  // Admits `request`; `done` records its result in `answers`.
  Status Admit(std::unique_ptr<InferenceRequest> request, CancelFlag cancelled = nullptr) {
    return admission.Admit(std::move(request), std::move(cancelled), nullptr, [this] {
      ++made;
      return [this](Result<InferenceResponse> result) {
        answers.push_back(std::move(result));
        in_flight_during_done = admission.in_flight().count();
      };
    });
  }

  // Admits a request for `model` through `to`, checked against `quota`;
  // `done` records its result in `answers`.
  Status AdmitWith(InferAdmission& to, const std::string& model, InferAdmission::QuotaCheck* quota) {
    return to.Admit(RequestFor(model), nullptr, nullptr, [this] {
      ++made;
      return [this](Result<InferenceResponse> result) { answers.push_back(std::move(result)); };
    }, quota);
  }

  std::shared_ptr<FakeModel> model = std::make_shared<FakeModel>(FakeModel::Options{.name = "m"});
  FakeRepository repository;
  InferAdmission admission{&repository, {.stopping_message = "stopping now"}};
  int made = 0;
  std::vector<Result<InferenceResponse>> answers;
  std::optional<int64_t> in_flight_during_done;
};

TEST_F(InferAdmissionTest, AFailedLookupReturnsItsStatusAndNeverMakesDone) {
  Status unknown = Admit(RequestFor("nope"));
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(), "Request for unknown model: 'nope' is not found");
  Status broken = Admit(RequestFor("broken"));
  EXPECT_EQ(broken.code(), StatusCode::kUnavailable);
  EXPECT_EQ(made, 0);
  EXPECT_TRUE(answers.empty());
  EXPECT_EQ(admission.in_flight().count(), 0);
}

TEST_F(InferAdmissionTest, ARequestCountsInFlightUntilDoneHasReturned) {
  CancelFlag cancelled = std::make_shared<CancelToken>();
  ASSERT_TRUE(Admit(RequestFor("m"), cancelled).ok());
  EXPECT_EQ(made, 1);
  EXPECT_EQ(admission.in_flight().count(), 1);
  EXPECT_FALSE(admission.in_flight().WaitForZero(std::chrono::milliseconds(1)));
  std::unique_ptr<InferenceRequest> held = model->TakeHeld();
  EXPECT_EQ(held->cancelled, cancelled);  // the client's flag reaches the model
  EXPECT_TRUE(answers.empty());
  model->Answer(*held);
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0].ok());
  EXPECT_EQ(answers[0].value().id, "r1");
  EXPECT_EQ(in_flight_during_done, 1);  // still counted while `done` runs
  EXPECT_EQ(admission.in_flight().count(), 0);
}

TEST_F(InferAdmissionTest, ARefusalInsideTheModelCallsDoneBeforeAdmitReturns) {
  model->set_hold(false);
  ASSERT_TRUE(Admit(RequestFor("m", /*with_input=*/false)).ok());
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(admission.in_flight().count(), 0);
}

TEST_F(InferAdmissionTest, StopAcceptingRefusesWithTheFrontEndsMessage) {
  EXPECT_TRUE(admission.CheckAccepting().ok());
  EXPECT_TRUE(admission.accepting());
  admission.StopAccepting();
  const Status refused = admission.CheckAccepting();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.message(), "stopping now");
  EXPECT_FALSE(admission.accepting());
}

// Both front ends' readiness (HTTP health/ready, gRPC ServerReady): the first
// reason that holds, in this order.
TEST_F(InferAdmissionTest, ReadinessNeedsAdmissionLivenessAndStrictlyEveryModel) {
  ResetLivenessForTesting();
  EXPECT_EQ(NotReadyReason(admission, repository, /*strict_readiness=*/true), std::nullopt);
  repository.all_ready = false;
  EXPECT_EQ(NotReadyReason(admission, repository, false), std::nullopt);
  EXPECT_EQ(NotReadyReason(admission, repository, true),
            "not every model in the repository is ready (strict readiness)");
  MarkNotLive("the acceptor stopped");
  EXPECT_EQ(NotReadyReason(admission, repository, false), "the acceptor stopped");
  admission.MarkNotReady();
  EXPECT_EQ(NotReadyReason(admission, repository, true), "server is shutting down");
  ResetLivenessForTesting();
}

TEST_F(InferAdmissionTest, TheReportIsNeededOnlyWithAnAccessLogOrATrace) {
  EXPECT_FALSE(admission.StartReport(std::nullopt));
  EXPECT_FALSE(admission.tracing());
  int lines = 0;
  admission.set_access_log([&lines](const AccessLogRecord&) { ++lines; });
  tracing::CompletionReport report = admission.StartReport(std::nullopt);
  ASSERT_TRUE(report);
  EXPECT_EQ(report.trace, nullptr);  // tracing is off
  report(AccessLogRecord{});
  EXPECT_EQ(lines, 1);
}

TEST_F(InferAdmissionTest, AClientOverItsQuotaIsRefusedBeforeTheModelAndItsSlotReturnsWithTheAnswer) {
  auto config = QuotaConfig::Parse(R"({"default": {"max_in_flight": 1}})", "q.json");
  ASSERT_TRUE(config.ok());
  InferAdmission limited{&repository, {.quotas = std::make_shared<ClientQuotas>(std::move(config).value())}};
  const auto admit = [&](const std::string& name, InferAdmission::QuotaCheck* quota) {
    return AdmitWith(limited, name, quota);
  };
  InferAdmission::QuotaCheck first{.client = "a", .rejection = {}};
  ASSERT_TRUE(admit("m", &first).ok());
  EXPECT_FALSE(first.rejection);
  // An unknown model is answered as such, not counted against the quota.
  InferAdmission::QuotaCheck unknown{.client = "a", .rejection = {}};
  EXPECT_EQ(admit("nope", &unknown).code(), StatusCode::kNotFound);
  EXPECT_FALSE(unknown.rejection);
  // Over the quota: refused with the reason, never handed to the model.
  InferAdmission::QuotaCheck second{.client = "a", .rejection = {}};
  EXPECT_FALSE(admit("m", &second).ok());
  ASSERT_TRUE(second.rejection);
  EXPECT_EQ(second.rejection->retry_after_s, 1u);
  EXPECT_EQ(made, 1);
  EXPECT_EQ(limited.in_flight().count(), 1);
  // Another client is not affected; without a check, nobody's quota applies.
  InferAdmission::QuotaCheck other{.client = "b", .rejection = {}};
  EXPECT_TRUE(admit("m", &other).ok());
  EXPECT_TRUE(admit("m", nullptr).ok());
  // The answer gives the slot back.
  model->Answer(*model->TakeHeld());
  InferAdmission::QuotaCheck third{.client = "a", .rejection = {}};
  EXPECT_TRUE(admit("m", &third).ok());
  EXPECT_FALSE(third.rejection);
  while (limited.in_flight().count() > 0) model->Answer(*model->TakeHeld());
}

TEST_F(InferAdmissionTest, AnEarlyQuotaCheckRefusesBeforeDecodingAndItsTicketIsTheOneAdmitUses) {
  auto config = QuotaConfig::Parse(R"({"default": {"rate": 0.001, "burst": 1, "max_in_flight": 1}})", "q.json");
  ASSERT_TRUE(config.ok());
  auto quotas = std::make_shared<ClientQuotas>(std::move(config).value());
  InferAdmission limited{&repository, {.quotas = quotas}};
  const auto admit = [&](InferAdmission::QuotaCheck* quota) { return AdmitWith(limited, "m", quota); };
  // The early check takes the one token and the in-flight slot; Admit takes
  // them from it, not a second time (which the empty bucket would refuse).
  InferAdmission::QuotaCheck first{.client = "a", .rejection = {}};
  ASSERT_TRUE(limited.CheckQuotaEarly("m", "", &first).ok());
  EXPECT_TRUE(first.admitted.acquired);
  ASSERT_TRUE(admit(&first).ok());
  EXPECT_FALSE(first.rejection);
  EXPECT_EQ(made, 1);
  // An unknown model is left to Admit (404) and counted nowhere.
  InferAdmission::QuotaCheck unknown{.client = "a", .rejection = {}};
  EXPECT_TRUE(limited.CheckQuotaEarly("nope", "", &unknown).ok());
  EXPECT_FALSE(unknown.admitted.acquired);
  EXPECT_FALSE(unknown.rejection);
  // Over the quota: refused early with Admit's status and the reason.
  InferAdmission::QuotaCheck second{.client = "a", .rejection = {}};
  Status refused = limited.CheckQuotaEarly("m", "", &second);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  ASSERT_TRUE(second.rejection);
  EXPECT_NE(second.rejection->message.find("requests in flight"), std::string::npos);
  ASSERT_EQ(quotas->Rejected().size(), 1u);
  EXPECT_EQ(quotas->Rejected()[0].count, 1u);
  // The answer gives the slot back; the rate still refuses.
  model->Answer(*model->TakeHeld());
  InferAdmission::QuotaCheck third{.client = "a", .rejection = {}};
  EXPECT_FALSE(limited.CheckQuotaEarly("m", "", &third).ok());
  ASSERT_TRUE(third.rejection);
  EXPECT_NE(third.rejection->message.find("requests/s"), std::string::npos);
  EXPECT_EQ(made, 1);
}

TEST_F(InferAdmissionTest, AnEarlyQuotaCheckHandsItsModelToAdmitUnlessItIsNoLongerReady) {
  auto config = QuotaConfig::Parse(R"({"default": {"max_in_flight": 10}})", "q.json");
  ASSERT_TRUE(config.ok());
  InferAdmission limited{&repository, {.quotas = std::make_shared<ClientQuotas>(std::move(config).value())}};
  const auto admit = [&](InferAdmission::QuotaCheck* quota) { return AdmitWith(limited, "m", quota); };
  // Checked and admitted: one lookup in all.
  InferAdmission::QuotaCheck first{.client = "a", .rejection = {}};
  ASSERT_TRUE(limited.CheckQuotaEarly("m", "", &first).ok());
  EXPECT_EQ(first.model, model);
  ASSERT_TRUE(admit(&first).ok());
  EXPECT_EQ(repository.lookups, 1);
  EXPECT_EQ(first.model, nullptr);  // Admit took the handle and let it go
  // The model it found went unready before Admit (evicted, unloaded): Admit
  // looks the model up again and answers as the repository does.
  InferAdmission::QuotaCheck second{.client = "a", .rejection = {}};
  ASSERT_TRUE(limited.CheckQuotaEarly("m", "", &second).ok());
  model->set_ready(false);
  ASSERT_TRUE(admit(&second).ok());
  EXPECT_EQ(repository.lookups, 3);
  model->set_ready(true);
  // An unknown model is not carried: Admit looks it up and answers 404.
  InferAdmission::QuotaCheck unknown{.client = "a", .rejection = {}};
  ASSERT_TRUE(limited.CheckQuotaEarly("nope", "", &unknown).ok());
  EXPECT_EQ(unknown.model, nullptr);
  EXPECT_EQ(limited.Admit(RequestFor("nope"), nullptr, nullptr, [] { return [](Result<InferenceResponse>) {}; },
                          &unknown).code(),
            StatusCode::kNotFound);
  EXPECT_EQ(made, 2);
  while (limited.in_flight().count() > 0) model->Answer(*model->TakeHeld());
}

}  // namespace
}  // namespace ortserve::common
