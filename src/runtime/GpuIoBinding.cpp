#include "runtime/GpuIoBinding.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "runtime/ExecutionProviders.h"
#include "runtime/OrtEnvironment.h"
#include "runtime/OrtError.h"

namespace ortserve {
namespace {

std::string ShapeKey(const std::vector<Ort::Value>& values) {
  std::string key;
  for (const auto& v : values) {
    for (int64_t d : v.GetTensorTypeAndShapeInfo().GetShape()) key += std::to_string(d) + "x";
    key += ";";
  }
  return key;
}

bool IsString(const Ort::Value& v) {
  return v.GetTensorTypeAndShapeInfo().GetElementType() == ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING;
}

}  // namespace

GpuIoBinding::GpuIoBinding(Ort::Session& session, const ModelSignature& signature,
                           const RuntimeOptions& options)
    : session_(session),
      label_(options.label),
      cuda_graph_(options.cuda_graph),
      max_graphs_(options.cuda_graph_max_shapes),
      pinned_info_("CudaPinned", OrtDeviceAllocator, options.device_id, OrtMemTypeCPUOutput),
      device_info_("Cuda", OrtDeviceAllocator, options.device_id, OrtMemTypeDefault),
      pinned_allocator_(session, pinned_info_),
      device_allocator_(session, device_info_),
      binding_(session) {
  for (const auto& input : signature.inputs) input_names_.push_back(input.name);
  for (const auto& output : signature.outputs) output_names_.push_back(output.name);
  pinned_.resize(input_names_.size());
  pinned_bytes_.assign(input_names_.size(), 0);
}

Result<std::unique_ptr<GpuIoBinding>> GpuIoBinding::Create(Ort::Session& session,
                                                           const ModelSignature& signature,
                                                           const RuntimeOptions& options) {
  const std::string context = "preparing IOBinding for model '" + options.label + "'";
  if (options.cuda_graph) {
    for (const auto& input : signature.inputs) {
      if (input.dtype == DataType::kBytes)
        return InvalidArgument(context + ": CUDA graphs need device inputs, but input '" + input.name +
                               "' is BYTES");
    }
    // Host<->device copies for graph slots go through Env::CopyTensors, which
    // uses the data transfer of the registered CUDA plugin library.
    std::string error = EnsureCudaPluginRegistered();
    if (!error.empty()) return Unavailable(context + ": CUDA graphs need Env::CopyTensors: " + error);
  }
  try {
    return std::unique_ptr<GpuIoBinding>(new GpuIoBinding(session, signature, options));
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, context);
  }
}

Status GpuIoBinding::Copy(const std::vector<Ort::Value>& from, const std::vector<Ort::Value>& to,
                          const char* what) {
  Ort::Status st = SharedOrtEnv().CopyTensors(from, to, nullptr);
  if (!st.IsOK())
    return Internal("model '" + label_ + "': copying " + what + " failed: " + st.GetErrorMessage());
  return Status::Ok();
}

Status GpuIoBinding::Run(const std::vector<Ort::Value>& staged, Ort::RunOptions& uncaptured,
                         std::vector<Ort::Value>* results) {
  if (!cuda_graph_) return RunPinned(staged, uncaptured, results);
  auto it = slots_.find(ShapeKey(staged));
  if (it != slots_.end()) return RunGraph(it->second, staged, results);
  if (static_cast<int>(slots_.size()) >= max_graphs_) return RunPinned(staged, uncaptured, results);
  auto slot = NewSlot(staged, uncaptured);
  if (!slot.ok()) return slot.status();
  // The slot's first run was uncaptured; hand back its outputs.
  std::vector<Ort::Value> host;
  for (auto& device : (*slot)->device_outputs) {
    auto info = device.GetTensorTypeAndShapeInfo();
    auto shape = info.GetShape();
    host.push_back(Ort::Value::CreateTensor(pinned_allocator_, shape.data(), shape.size(), info.GetElementType()));
  }
  Status copied = Copy((*slot)->device_outputs, host, "outputs to the host");
  if (!copied.ok()) return copied;
  for (auto& v : host) results->push_back(std::move(v));
  return Status::Ok();
}

Status GpuIoBinding::RunPinned(const std::vector<Ort::Value>& staged, Ort::RunOptions& run_options,
                               std::vector<Ort::Value>* results) {
  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();
  std::vector<Ort::Value> bound;  // keeps the pinned views alive during the run
  bound.reserve(staged.size());
  for (size_t i = 0; i < staged.size(); ++i) {
    if (IsString(staged[i])) {
      binding_.BindInput(input_names_[i].c_str(), staged[i]);
      continue;
    }
    const size_t bytes = staged[i].GetTensorSizeInBytes();
    if (bytes > pinned_bytes_[i]) {
      void* p = pinned_allocator_.Alloc(bytes);
      OrtAllocator* alloc = pinned_allocator_;
      pinned_[i] = std::unique_ptr<void, std::function<void(void*)>>(
          p, [alloc](void* q) { alloc->Free(alloc, q); });
      pinned_bytes_[i] = bytes;
    }
    if (bytes > 0) std::memcpy(pinned_[i].get(), staged[i].GetTensorRawData(), bytes);
    auto info = staged[i].GetTensorTypeAndShapeInfo();
    auto shape = info.GetShape();
    bound.push_back(Ort::Value::CreateTensor(pinned_info_, pinned_[i].get(), bytes, shape.data(), shape.size(),
                                             info.GetElementType()));
    binding_.BindInput(input_names_[i].c_str(), bound.back());
  }
  // Bound by memory info, not by value: ORT allocates fresh pinned outputs
  // each run, so tensors exported from an earlier run are never overwritten.
  for (const auto& name : output_names_) binding_.BindOutput(name.c_str(), pinned_info_);
  session_.Run(run_options, binding_);
  binding_.SynchronizeOutputs();
  for (auto& v : binding_.GetOutputValues()) results->push_back(std::move(v));
  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();
  return Status::Ok();
}

Result<GpuIoBinding::GraphSlot*> GpuIoBinding::NewSlot(const std::vector<Ort::Value>& staged,
                                                       Ort::RunOptions& uncaptured) {
  GraphSlot slot;
  for (const auto& v : staged) {
    auto info = v.GetTensorTypeAndShapeInfo();
    auto shape = info.GetShape();
    slot.device_inputs.push_back(
        Ort::Value::CreateTensor(device_allocator_, shape.data(), shape.size(), info.GetElementType()));
  }
  Status copied = Copy(staged, slot.device_inputs, "inputs to the device");
  if (!copied.ok()) return copied;
  // One uncaptured run learns the output shapes; its device outputs become
  // the slot's fixed output buffers.
  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();
  for (size_t i = 0; i < staged.size(); ++i) binding_.BindInput(input_names_[i].c_str(), slot.device_inputs[i]);
  for (const auto& name : output_names_) binding_.BindOutput(name.c_str(), device_info_);
  session_.Run(uncaptured, binding_);
  binding_.SynchronizeOutputs();
  slot.device_outputs = binding_.GetOutputValues();
  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();
  const int graph_id = next_graph_id_++;
  slot.run_options.AddConfigEntry("gpu_graph_id", std::to_string(graph_id).c_str());
  spdlog::info("{}: CUDA graph id {} for input shapes {}", label_, graph_id, ShapeKey(staged));
  auto [it, inserted] = slots_.emplace(ShapeKey(staged), std::move(slot));
  (void)inserted;
  return &it->second;
}

Status GpuIoBinding::RunGraph(GraphSlot& slot, const std::vector<Ort::Value>& staged,
                              std::vector<Ort::Value>* results) {
  Status copied = Copy(staged, slot.device_inputs, "inputs to the device");
  if (!copied.ok()) return copied;
  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();
  for (size_t i = 0; i < staged.size(); ++i) binding_.BindInput(input_names_[i].c_str(), slot.device_inputs[i]);
  for (size_t i = 0; i < output_names_.size(); ++i)
    binding_.BindOutput(output_names_[i].c_str(), slot.device_outputs[i]);
  session_.Run(slot.run_options, binding_);
  binding_.SynchronizeOutputs();
  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();
  std::vector<Ort::Value> host;
  for (auto& device : slot.device_outputs) {
    auto info = device.GetTensorTypeAndShapeInfo();
    auto shape = info.GetShape();
    host.push_back(Ort::Value::CreateTensor(pinned_allocator_, shape.data(), shape.size(), info.GetElementType()));
  }
  copied = Copy(slot.device_outputs, host, "outputs to the host");
  if (!copied.ok()) return copied;
  for (auto& v : host) results->push_back(std::move(v));
  return Status::Ok();
}

}  // namespace ortserve
