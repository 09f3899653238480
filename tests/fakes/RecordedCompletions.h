#pragma once
// What tests hand requests in with: a completion callback per request id
// that records the result (completing one twice fails the test), and a
// RequestCompleter that answers a scheduler's requests through their own
// on_complete, as a served model does once it has shaped the response.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "core/InferenceRequest.h"
#include "scheduler/Scheduler.h"

namespace ortserve {

class RecordedCompletions {
 public:
  CompletionCallback For(const std::string& id) {
    return [this, id](Result<InferenceResponse> result) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!results_.emplace(id, std::move(result)).second) ADD_FAILURE() << "request '" << id << "' completed twice";
      cv_.notify_all();
    };
  }
  bool Done(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return results_.count(id) > 0;
  }
  // Waits (liveness-guarded, never a timing assertion) for `id`; a missing
  // result fails the test.
  Result<InferenceResponse> Get(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return results_.count(id) > 0; })) {
      ADD_FAILURE() << "request '" << id << "' never completed";
      return Internal("never completed");
    }
    return results_.at(id);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Result<InferenceResponse>> results_;
};

class CallbackCompleter final : public RequestCompleter {
 public:
  void Complete(std::unique_ptr<InferenceRequest> request, Result<InferenceResponse> result) override {
    if (request->on_complete) request->on_complete(std::move(result));
  }
};

}  // namespace ortserve
