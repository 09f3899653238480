#include "runtime/OrtModelInstance.h"

#include <onnxruntime_cxx_api.h>

#include <spdlog/spdlog.h>

#include <mutex>

#include "runtime/InputStaging.h"
#include "runtime/OrtError.h"
#include "runtime/OrtModelSignature.h"
#include "runtime/OrtSessionFactory.h"
#include "runtime/OutputTensors.h"

namespace ortserve {
namespace {

// One ORT session with everything a Run needs prepared at creation: name
// arrays, input staging buffers, one RunOptions.
//
// Terminate semantics: a Terminate() stops the Run that is in progress when
// it is called, where "in progress" starts at the first statement of Run()
// (before ORT's terminate flag is reset) and ends when Run() returns. Such a
// Run always returns kCancelled, even if ORT happened to finish first, so
// the caller can rely on "Terminate during Run => non-OK". A Terminate() while
// no Run is in progress does nothing: it cannot leak into, and kill, a later
// unrelated Run. Callers that must stop work before it reaches the instance
// check their own deadline/cancel flag before calling Run().
class OrtModelInstance final : public ModelInstance {
 public:
  OrtModelInstance(std::string label, Ort::Session session, ModelSignature signature)
      : label_(std::move(label)),
        session_(std::move(session)),
        signature_(std::move(signature)),
        staging_(signature_.inputs, label_) {
    // The name arrays point into signature_, which never changes after this.
    for (const auto& input : signature_.inputs) input_names_.push_back(input.name.c_str());
    for (const auto& output : signature_.outputs) {
      output_names_.push_back(output.name);
      output_name_ptrs_.push_back(output.name.c_str());
    }
    input_values_.reserve(signature_.inputs.size());
  }

  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    if (outputs == nullptr) return InvalidArgument("model '" + label_ + "': outputs must not be null");
    Status status = BeginRun();
    if (status.ok()) status = RunSession(inputs, outputs);
    const bool terminated = EndRun();
    if (!terminated) return status;
    outputs->clear();
    return Status(StatusCode::kCancelled,
                  status.ok() ? "run of model '" + label_ + "' was terminated (its result was discarded)"
                              : "run of model '" + label_ + "' was terminated: " + status.message());
  }

  void Terminate() override {
    std::lock_guard<std::mutex> lock(terminate_mutex_);
    if (!running_) return;
    terminate_requested_ = true;  // the Run fails even if ORT does not stop in time
    try {
      run_options_.SetTerminate();
    } catch (const std::exception& e) {
      spdlog::error("{}: cannot ask ONNX Runtime to stop the current run: {}", label_, e.what());
    }
  }

  const std::vector<std::string>& OutputNames() const override { return output_names_; }

 private:
  Status BeginRun() {
    // Resetting ORT's flag under the same lock Terminate() takes means a
    // Terminate() that lands after Run() started can never be wiped out.
    std::lock_guard<std::mutex> lock(terminate_mutex_);
    terminate_requested_ = false;
    running_ = true;
    try {
      run_options_.UnsetTerminate();
    } catch (const Ort::Exception& e) {
      return StatusFromOrt(e, "starting a run of model '" + label_ + "'");
    }
    return Status::Ok();
  }

  // Returns whether a Terminate() arrived during this Run.
  bool EndRun() {
    std::lock_guard<std::mutex> lock(terminate_mutex_);
    running_ = false;
    return terminate_requested_;
  }

  Status RunSession(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
    const char* context = "running model";
    try {
      outputs->clear();
      input_values_.clear();
      Status staged = staging_.Stage(inputs, &input_values_);
      if (!staged.ok()) {
        input_values_.clear();
        return staged;
      }
      // One holder for all outputs of this Run: every output tensor shares it,
      // so ORT's buffers stay alive while any of them is in use.
      auto results = std::make_shared<std::vector<Ort::Value>>();
      results->reserve(output_name_ptrs_.size());
      for (size_t i = 0; i < output_name_ptrs_.size(); ++i) results->emplace_back(nullptr);
      session_.Run(run_options_, input_names_.data(), input_values_.data(), input_values_.size(),
                   output_name_ptrs_.data(), results->data(), results->size());
      // Input values view the caller's memory; drop them before returning.
      input_values_.clear();
      outputs->reserve(results->size());
      return ExportOutputs(results, output_names_, label_, outputs);
    } catch (const Ort::Exception& e) {
      input_values_.clear();
      outputs->clear();
      return StatusFromOrt(e, std::string(context) + " '" + label_ + "'");
    } catch (const std::exception& e) {
      input_values_.clear();
      outputs->clear();
      return StatusFromException(e, std::string(context) + " '" + label_ + "'");
    }
  }

  const std::string label_;
  Ort::Session session_;
  const ModelSignature signature_;
  std::vector<const char*> input_names_;
  std::vector<std::string> output_names_;
  std::vector<const char*> output_name_ptrs_;
  InputStaging staging_;
  std::vector<Ort::Value> input_values_;  // reused across runs; capacity kept
  Ort::RunOptions run_options_;

  std::mutex terminate_mutex_;
  bool running_ = false;              // guarded by terminate_mutex_
  bool terminate_requested_ = false;  // guarded by terminate_mutex_
};

}  // namespace

Result<std::unique_ptr<ModelInstance>> CreateOrtModelInstance(const RuntimeOptions& requested) {
  RuntimeOptions options = requested;
  if (options.label.empty()) options.label = options.model_path;  // messages must name the model
  auto loaded = CreateOrtSession(options);
  if (!loaded.ok()) return loaded.status();
  const std::string context = "preparing model '" + options.label + "'";
  try {
    auto signature = ReadModelSignature(loaded->session, options.label);
    if (!signature.ok()) return signature.status();
    spdlog::info("{}: instance ready: {}", options.label, DescribeSession(options, loaded->providers));
    return std::unique_ptr<ModelInstance>(std::make_unique<OrtModelInstance>(
        options.label, std::move(loaded->session), std::move(signature).value()));
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, context);
  } catch (const std::exception& e) {
    return StatusFromException(e, context);
  }
}

}  // namespace ortserve
