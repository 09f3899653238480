#include "fakes/FakeModel.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

namespace ortserve {
namespace {

template <typename T>
void AddOneAs(std::vector<std::byte>* bytes) {
  for (size_t offset = 0; offset + sizeof(T) <= bytes->size(); offset += sizeof(T)) {
    T value;
    std::memcpy(&value, bytes->data() + offset, sizeof(T));
    value = static_cast<T>(value + 1);
    std::memcpy(bytes->data() + offset, &value, sizeof(T));
  }
}

TensorData AddOne(DataType dtype, const TensorData& data) {
  std::vector<std::byte> bytes(data.data(), data.data() + data.size());
  switch (dtype) {
    case DataType::kFp32: AddOneAs<float>(&bytes); break;
    case DataType::kInt8: AddOneAs<int8_t>(&bytes); break;
    case DataType::kInt32: AddOneAs<int32_t>(&bytes); break;
    case DataType::kInt64: AddOneAs<int64_t>(&bytes); break;
    default: break;
  }
  return TensorData::FromVector(std::move(bytes));
}

FakeModel::Options WithConfigName(FakeModel::Options options) {
  options.config.set_name(options.name);
  return options;
}

}  // namespace

FakeModel::FakeModel(Options options)
    : options_(WithConfigName(std::move(options))),
      stats_(options_.stats_max_batch_size > 0 ? options_.stats_max_batch_size
                                                : options_.config.max_batch_size()),
      hold_(options_.hold) {}

FakeModel::FakeModel(std::string name, inference::ModelConfig config)
    : FakeModel(Options{.name = std::move(name), .config = std::move(config)}) {}

FakeModel::~FakeModel() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

void FakeModel::Infer(std::unique_ptr<InferenceRequest> request) {
  std::unique_lock lock(mu_);
  last_timeout_us_ = request->timeout_us;
  last_priority_ = request->priority;
  last_cancel_flag_ = request->cancelled;
  if (request->inputs.empty()) {
    lock.unlock();
    request->on_complete(InvalidArgument(options_.no_inputs_message.empty()
                                             ? "model '" + options_.name + "' needs at least one input"
                                             : options_.no_inputs_message));
    return;
  }
  if (hold_) {
    held_.push_back(std::move(request));
    cv_.notify_all();
    return;
  }
  if (options_.on == AnswerThread::kOwnThread) return Dispatch(std::move(request));
  lock.unlock();
  Answer(*request);
}

void FakeModel::set_hold(bool hold) {
  std::lock_guard lock(mu_);
  hold_ = hold;
}

void FakeModel::WaitForHeld(size_t count) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return held_.size() >= count; });
}

std::unique_ptr<InferenceRequest> FakeModel::TakeHeld() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !held_.empty(); });
  std::unique_ptr<InferenceRequest> request = std::move(held_.front());
  held_.pop_front();
  return request;
}

void FakeModel::Release(const std::string& id) {
  std::unique_lock lock(mu_);
  for (auto it = held_.begin(); it != held_.end(); ++it) {
    if ((*it)->id != id) continue;
    std::unique_ptr<InferenceRequest> request = std::move(*it);
    held_.erase(it);
    if (options_.on == AnswerThread::kOwnThread) return Dispatch(std::move(request));
    lock.unlock();
    Answer(*request);
    return;
  }
  ADD_FAILURE() << "no held request " << id;
}

void FakeModel::Answer(InferenceRequest& request) const { request.on_complete(Respond(request)); }

void FakeModel::Dispatch(std::unique_ptr<InferenceRequest> request) {
  threads_.emplace_back([this, request = std::move(request)] { Answer(*request); });
}

Result<InferenceResponse> FakeModel::Respond(const InferenceRequest& request) const {
  if (options_.reply == Reply::kFail) return Internal("fake");
  InferenceResponse response;
  response.model_name = options_.name;
  response.model_version = options_.version;
  response.id = request.id;
  for (const Tensor& input : request.inputs) {
    Tensor output{"OUT_" + input.name, input.dtype, input.shape, input.data};
    if (options_.reply == Reply::kAddOne) output.data = AddOne(input.dtype, input.data);
    RequestedOutput requested{output.name, false};
    for (const RequestedOutput& asked : request.requested_outputs) {
      if (asked.name == output.name) requested.binary_data = asked.binary_data;
    }
    response.outputs.push_back(std::move(output));
    response.requested.push_back(std::move(requested));
  }
  return response;
}

CancelFlag FakeModel::LastCancelFlag() const {
  std::lock_guard lock(mu_);
  return last_cancel_flag_;
}

uint64_t FakeModel::last_timeout_us() const {
  std::lock_guard lock(mu_);
  return last_timeout_us_;
}

uint32_t FakeModel::last_priority() const {
  std::lock_guard lock(mu_);
  return last_priority_;
}

}  // namespace ortserve
