// LogContext's scopes: what a thread's current context is inside LogScope and
// RequestLogScope, that a RequestLogScope copies the strings it is given, and
// that it does nothing while no log format wants the fields.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/LogContext.h"

namespace ortserve {
namespace {

class RequestLogScopeTest : public ::testing::Test {
 protected:
  void SetUp() override { RequestLogFieldsWanted().store(true); }
  void TearDown() override { RequestLogFieldsWanted().store(false); }
};

TEST_F(RequestLogScopeTest, CopiesTheRequestAndNests) {
  ASSERT_EQ(CurrentLogContext(), nullptr);
  auto model = std::make_unique<std::string>("a model name that does not fit inline");
  auto id = std::make_unique<std::string>("request-1");
  RequestTrace trace;
  trace.trace_id.bytes[3] = 7;
  trace.span_id.bytes[2] = 9;
  {
    RequestLogScope outer(*model, "1", "", &trace);
    model.reset();
    const LogContext* context = CurrentLogContext();
    ASSERT_NE(context, nullptr);
    EXPECT_EQ(context->model, "a model name that does not fit inline");
    EXPECT_EQ(context->request_id, "");
    EXPECT_TRUE(context->traced());
    EXPECT_EQ(context->trace_id, trace.trace_id);
    EXPECT_EQ(context->span_id, trace.span_id);
    {
      RequestLogScope inner("m", "2", *id);
      id.reset();
      EXPECT_EQ(CurrentLogContext()->model, "m");
      EXPECT_EQ(CurrentLogContext()->request_id, "request-1");
      EXPECT_FALSE(CurrentLogContext()->traced());
    }
    // The outer scope's copy is its own: the inner one wrote other buffers.
    EXPECT_EQ(CurrentLogContext(), context);
    EXPECT_EQ(context->model, "a model name that does not fit inline");
    EXPECT_EQ(context->version, "1");
  }
  EXPECT_EQ(CurrentLogContext(), nullptr);
}

TEST_F(RequestLogScopeTest, DeeperThanItsBuffersKeepsTheEnclosingContext) {
  RequestLogScope a("a", "1", "");
  RequestLogScope b("b", "1", "");
  RequestLogScope c("c", "1", "");
  RequestLogScope d("d", "1", "");
  {
    RequestLogScope e("e", "1", "");
    EXPECT_EQ(CurrentLogContext()->model, "d");
  }
  EXPECT_EQ(CurrentLogContext()->model, "d");
}

TEST_F(RequestLogScopeTest, NothingWhileTheFieldsAreNotWanted) {
  RequestLogFieldsWanted().store(false);
  {
    RequestLogScope scope("m", "1", "r");
    EXPECT_EQ(CurrentLogContext(), nullptr);
  }
  // A plain LogScope is always installed: its caller reports a record.
  LogContext context;
  context.model = "m";
  LogScope scope(context);
  EXPECT_EQ(CurrentLogContext(), &context);
}

}  // namespace
}  // namespace ortserve
