#include "scheduler/ArrivalForecast.h"

#include <gtest/gtest.h>

namespace ortserve {
namespace {

using namespace std::chrono_literals;

const Clock::time_point kStart = Clock::time_point{} + 1h;

TEST(ArrivalForecast, ExpectsNothingUntilSomethingIsAnswered) {
  ArrivalForecast forecast(8);
  EXPECT_FALSE(forecast.ExpectsMore(kStart));
  forecast.Arrived(kStart);  // an arrival nobody expected changes nothing
  EXPECT_EQ(forecast.expected(), 0u);
}

TEST(ArrivalForecast, EachAnswerExpectsOneArrivalAndEachArrivalConsumesOne) {
  ArrivalForecast forecast(8);
  forecast.Answered(3, kStart);
  EXPECT_TRUE(forecast.ExpectsMore(kStart));
  forecast.Arrived(kStart + 10us);
  forecast.Arrived(kStart + 20us);
  EXPECT_TRUE(forecast.ExpectsMore(kStart + 20us));
  forecast.Arrived(kStart + 30us);
  EXPECT_FALSE(forecast.ExpectsMore(kStart + 30us));
}

TEST(ArrivalForecast, NeverExpectsMoreThanTheCap) {
  ArrivalForecast forecast(4);
  forecast.Answered(3, kStart);
  forecast.Answered(3, kStart);
  EXPECT_EQ(forecast.expected(), 4u);
}

TEST(ArrivalForecast, ExpectationsLapseAfterThePatienceFloorWithoutHistory) {
  ArrivalForecast forecast(8);
  forecast.Answered(2, kStart);
  EXPECT_EQ(forecast.ExpectUntil(), kStart + ArrivalForecast::kMinPatience);
  EXPECT_TRUE(forecast.ExpectsMore(kStart + ArrivalForecast::kMinPatience - 1us));
  EXPECT_FALSE(forecast.ExpectsMore(kStart + ArrivalForecast::kMinPatience));
}

TEST(ArrivalForecast, PatienceFollowsHowLongClientsTakeToComeBack) {
  ArrivalForecast forecast(8);
  forecast.Answered(1, kStart);
  forecast.Arrived(kStart + 1ms);  // slow clients: first sample is the average
  forecast.Answered(1, kStart + 2ms);
  EXPECT_EQ(forecast.ExpectUntil(), kStart + 2ms + ArrivalForecast::kPatience * 1ms);
}

TEST(ArrivalForecast, StaleExpectationsAreDroppedAtTheNextAnswer) {
  ArrivalForecast forecast(8);
  forecast.Answered(5, kStart);
  forecast.Answered(1, kStart + 1s);  // the five never came back
  EXPECT_EQ(forecast.expected(), 1u);
}

TEST(ArrivalForecast, AClosedWindowDropsTheExpectations) {
  ArrivalForecast forecast(8);
  forecast.Answered(5, kStart);
  forecast.WindowClosed();
  EXPECT_FALSE(forecast.ExpectsMore(kStart));
}

}  // namespace
}  // namespace ortserve
