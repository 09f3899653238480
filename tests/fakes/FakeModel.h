#pragma once
// A Model without ORT or a scheduler, for the front-end and metrics tests.
// Each test picks what it replies and on which thread (Options):
//   reply  kEcho:   every input comes back as output "OUT_<input>" (same type,
//                   shape and bytes, shared with the request);
//          kAddOne: the same, with FP32, INT8, INT32 and INT64 elements plus
//                   one (other types echoed);
//          kFail:   Internal("fake") for every request.
//   on     kCallerThread: on_complete runs inside Infer, on the caller's thread;
//          kOwnThread:    on a thread of its own per request, as a scheduler
//                         worker would (the destructor joins them).
//   hold   requests are kept until the test answers them (Release, or
//          TakeHeld then Answer).
// A request without inputs is refused synchronously with kInvalidArgument,
// as the real model's validation does. Thread-safe.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "repository/ModelRepository.h"

namespace ortserve {

class FakeModel final : public Model {
 public:
  enum class Reply { kEcho, kAddOne, kFail };
  enum class AnswerThread { kCallerThread, kOwnThread };

  struct Options {
    std::string name{};
    std::string version = "1";
    // Its name is set to `name`.
    inference::ModelConfig config{};
    Reply reply = Reply::kEcho;
    AnswerThread on = AnswerThread::kCallerThread;
    bool hold = false;
    // Batch sizes the statistics track; 0: the config's max_batch_size.
    int stats_max_batch_size = 0;
    size_t queue_depth = 0;
    size_t busy_instances = 0;
    // The refusal of a request without inputs; empty: "model '<name>' needs
    // at least one input".
    std::string no_inputs_message{};
  };

  explicit FakeModel(Options options);
  // A model replying kEcho on the caller's thread.
  FakeModel(std::string name, inference::ModelConfig config);
  ~FakeModel() override;  // joins the threads it answered on

  const std::string& name() const override { return options_.name; }
  const std::string& version() const override { return options_.version; }
  const inference::ModelConfig& config() const override { return options_.config; }
  ModelStatistics& stats() override { return stats_; }
  bool ready() const override { return ready_.load(); }
  size_t QueueDepth() const override { return options_.queue_depth; }
  size_t BusyInstances() const override { return options_.busy_instances; }
  void Infer(std::unique_ptr<InferenceRequest> request) override;

  // What ready() answers (true at first); Infer serves requests regardless.
  void set_ready(bool ready) { ready_.store(ready); }
  // From now on, requests are held (true) or answered (false); those held
  // already stay held.
  void set_hold(bool hold);
  // Waits until at least `count` requests are held.
  void WaitForHeld(size_t count);
  // Waits for a held request and takes the oldest one out.
  std::unique_ptr<InferenceRequest> TakeHeld();
  // Answers the held request with this id, on the model's thread (fails the
  // test if there is none).
  void Release(const std::string& id);
  // Answers `request` now, on the calling thread.
  void Answer(InferenceRequest& request) const;

  // What the last request that reached Infer carried.
  CancelFlag LastCancelFlag() const;
  uint64_t last_timeout_us() const;
  uint32_t last_priority() const;

 private:
  Result<InferenceResponse> Respond(const InferenceRequest& request) const;
  // Called with mu_ held.
  void Dispatch(std::unique_ptr<InferenceRequest> request);

  const Options options_;
  ModelStatistics stats_;
  std::atomic<bool> ready_{true};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool hold_;                                         // guarded by mu_
  std::deque<std::unique_ptr<InferenceRequest>> held_;  // guarded by mu_
  std::vector<std::thread> threads_;                  // guarded by mu_
  uint64_t last_timeout_us_ = 0;                      // guarded by mu_
  uint32_t last_priority_ = 0;                        // guarded by mu_
  CancelFlag last_cancel_flag_;                       // guarded by mu_
};

}  // namespace ortserve
