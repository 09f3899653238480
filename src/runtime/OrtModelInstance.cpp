#include "runtime/OrtModelInstance.h"

#include <onnxruntime_cxx_api.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

#include "runtime/GpuIoBinding.h"
#include "runtime/InputStaging.h"
#include "runtime/NumericalComparison.h"
#include "runtime/OrtError.h"
#include "runtime/OrtModelSignature.h"
#include "runtime/OrtSessionFactory.h"
#include "runtime/OutputTensors.h"
#include "runtime/SharedWeights.h"

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
  OrtModelInstance(std::string label, Ort::Session session, ModelSignature signature,
                   std::shared_ptr<SharedWeights> shared_weights, ModelCacheUse cache_use)
      : label_(std::move(label)),
        shared_weights_(std::move(shared_weights)),
        session_(std::move(session)),
        cache_use_(cache_use),
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

  // GPU sessions only. Called once, before the first Run.
  Status EnableGpuPath(const RuntimeOptions& options) {
    if (options.io_binding) {
      auto gpu = GpuIoBinding::Create(session_, signature_, options);
      if (!gpu.ok()) {
        // CUDA graphs cannot work without it; plain IOBinding is only an
        // optimisation, so the instance still serves, and says so.
        if (options.cuda_graph) return gpu.status();
        spdlog::warn("{}: IOBinding disabled, running with plain Run(): {}", label_, gpu.status().message());
        return Status::Ok();
      }
      gpu_ = std::move(gpu).value();
      if (options.cuda_graph) {
        // Runs outside the captured shapes (and each shape's first run) must not be captured.
        run_options_.AddConfigEntry("gpu_graph_id", "-1");
      }
    }
    return Status::Ok();
  }

  void SetNumericalReference(std::unique_ptr<ModelInstance> reference, const RuntimeOptions& options) {
    reference_ = std::move(reference);
    numerical_check_ = options.numerical_check;
    numerical_tolerance_ = options.numerical_tolerance;
    numerical_runs_left_ = options.numerical_check_runs;
  }

  void FinishWarmup() override { reference_.reset(); }

  ModelCacheUse cache_use() const override { return cache_use_; }

  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    if (outputs == nullptr) return InvalidArgument("model '" + label_ + "': outputs must not be null");
    Status status = BeginRun();
    if (status.ok()) status = RunSession(inputs, outputs);
    const bool terminated = EndRun();
    if (!terminated) return reference_ && status.ok() ? CheckNumerics(inputs, *outputs) : status;
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
      if (gpu_) {
        Status ran = gpu_->Run(input_values_, run_options_, results.get());
        if (!ran.ok()) {
          input_values_.clear();
          return ran;
        }
      } else {
        for (size_t i = 0; i < output_name_ptrs_.size(); ++i) results->emplace_back(nullptr);
        session_.Run(run_options_, input_names_.data(), input_values_.data(), input_values_.size(),
                     output_name_ptrs_.data(), results->data(), results->size());
      }
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

  // Compares this run's outputs with the CPU reference session (warm-up only).
  Status CheckNumerics(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
    std::vector<Tensor> expected;
    Status ran = reference_->Run(inputs, &expected);
    if (--numerical_runs_left_ <= 0) reference_.reset();
    if (!ran.ok()) {
      spdlog::warn("{}: numerical check skipped: the CPU reference failed: {}", label_, ran.message());
      return Status::Ok();
    }
    NumericalReport report = CompareOutputs(outputs, expected, numerical_tolerance_);
    if (report.passed) {
      spdlog::info("{}: numerical check vs CPU FP32 passed: {}", label_, DescribeReport(report));
      return Status::Ok();
    }
    const std::string message = "model '" + label_ + "': GPU outputs differ from the CPU FP32 reference: " +
                                DescribeReport(report);
    if (numerical_check_ == NumericalCheck::kEnforce) {
      reference_.reset();
      return Internal(message + " (numerical_check=enforce)");
    }
    spdlog::warn("{} (numerical_check=warn)", message);
    return Status::Ok();
  }

  const std::string label_;
  // Before the session: the container must outlive it.
  const std::shared_ptr<SharedWeights> shared_weights_;
  Ort::Session session_;
  const ModelCacheUse cache_use_;
  const ModelSignature signature_;
  std::vector<const char*> input_names_;
  std::vector<std::string> output_names_;
  std::vector<const char*> output_name_ptrs_;
  InputStaging staging_;
  std::vector<Ort::Value> input_values_;  // reused across runs; capacity kept
  Ort::RunOptions run_options_;
  std::unique_ptr<GpuIoBinding> gpu_;          // GPU sessions with io_binding only
  std::unique_ptr<ModelInstance> reference_;   // CPU FP32 session while checking numerics
  NumericalCheck numerical_check_ = NumericalCheck::kOff;
  double numerical_tolerance_ = 0.0;
  int numerical_runs_left_ = 0;

  std::mutex terminate_mutex_;
  bool running_ = false;              // guarded by terminate_mutex_
  bool terminate_requested_ = false;  // guarded by terminate_mutex_
};

}  // namespace

namespace {

bool RunsOnGpu(const std::vector<std::string>& providers) {
  return std::any_of(providers.begin(), providers.end(), [](const std::string& p) {
    return p == "CUDAExecutionProvider" || p == "TensorrtExecutionProvider";
  });
}

// Options of the CPU FP32 session a GPU instance is checked against.
RuntimeOptions ReferenceOptions(const RuntimeOptions& gpu) {
  RuntimeOptions cpu = gpu;
  cpu.execution_providers.clear();
  cpu.allow_fallback = false;
  cpu.io_binding = false;
  cpu.cuda_graph = false;
  cpu.numerical_check = NumericalCheck::kOff;
  cpu.label = gpu.label + " (CPU reference)";
  return cpu;
}

}  // namespace

std::shared_ptr<SharedWeights> CreateSharedWeights() { return std::make_shared<SharedWeights>(); }

void ReleaseSharedWeightPages(SharedWeights& weights) { weights.ReleaseResidentPages(); }

Result<std::unique_ptr<ModelInstance>> CreateOrtModelInstance(const RuntimeOptions& requested) {
  RuntimeOptions options = requested;
  if (options.label.empty()) options.label = options.model_path;  // messages must name the model
  if (options.cuda_graph && !options.io_binding) {
    return InvalidArgument("model '" + options.label +
                           "': CUDA graphs need IOBinding (fixed device buffers); enable io_binding");
  }
  auto loaded = CreateOrtSession(options);
  if (!loaded.ok()) return loaded.status();
  const std::string context = "preparing model '" + options.label + "'";
  try {
    auto signature = ReadModelSignature(loaded->session, options.label);
    if (!signature.ok()) return signature.status();
    const bool on_gpu = RunsOnGpu(loaded->providers);
    if (!on_gpu && (options.io_binding || options.cuda_graph || options.numerical_check != NumericalCheck::kOff)) {
      if (!options.execution_providers.empty())
        spdlog::warn("{}: the session runs on CPU only: GPU settings (IOBinding, CUDA graphs, numerical "
                     "check) are not used",
                     options.label);
    }
    spdlog::info("{}: instance ready: {}{}", options.label, DescribeSession(options, *loaded),
                 on_gpu ? fmt::format(", device {}, io_binding {}, cuda_graph {}", options.device_id,
                                      options.io_binding ? "on" : "off", options.cuda_graph ? "on" : "off")
                        : std::string());
    auto instance = std::make_unique<OrtModelInstance>(options.label, std::move(loaded->session),
                                                       std::move(signature).value(), options.shared_weights,
                                                       loaded->cache_use);
    if (on_gpu) {
      Status gpu = instance->EnableGpuPath(options);
      if (!gpu.ok()) return gpu;
      if (options.numerical_check != NumericalCheck::kOff) {
        auto reference = CreateOrtModelInstance(ReferenceOptions(options));
        if (!reference.ok()) return Status(reference.status().code(), context + ": numerical check: " +
                                                                          reference.status().message());
        instance->SetNumericalReference(std::move(reference).value(), options);
      }
    }
    return std::unique_ptr<ModelInstance>(std::move(instance));
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, context);
  } catch (const std::exception& e) {
    return StatusFromException(e, context);
  }
}

}  // namespace ortserve
