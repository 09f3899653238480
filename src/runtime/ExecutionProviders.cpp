#include "runtime/ExecutionProviders.h"

#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <mutex>
#include <unordered_map>

#include "core/Text.h"
#include "runtime/OrtEnvironment.h"
#include "runtime/OrtModelInstance.h"

namespace ortserve {
namespace {

constexpr const char* kCpu = "CPUExecutionProvider";
constexpr const char* kCuda = "CUDAExecutionProvider";
constexpr const char* kTensorRt = "TensorrtExecutionProvider";

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::unordered_map<std::string, std::string> OptionMap(const ExecutionProviderOptions& provider) {
  return {provider.options.begin(), provider.options.end()};
}

std::string LibraryFile(const std::string& name) {
  return name == "cuda" ? "libonnxruntime_providers_cuda.so" : "libonnxruntime_providers_tensorrt.so";
}

std::string MissingProvider(const char* ort_name, const std::string& name,
                            const std::vector<std::string>& available) {
  return std::string(ort_name) + " is not available in this ONNX Runtime build (available: " +
         Join(available) + "; no " + LibraryFile(name) + " next to libonnxruntime.so in '" +
         OrtLibraryDir() + "': run `make gpu-deps` and build with "
         "ONNXRUNTIME_ROOT=third_party/onnxruntime-gpu, see docs/gpu.md)";
}

int DeviceIdOption(const ExecutionProviderOptions& provider) {
  for (const auto& [key, value] : provider.options) {
    int id = 0;
    if (key == "device_id" &&
        std::from_chars(value.data(), value.data() + value.size(), id).ec == std::errc())
      return id;
  }
  return 0;
}

// CPU-only libonnxruntime.so (the npm SDK) with the GPU provider libraries
// installed next to it: CUDA goes through the plugin-EP interface (the
// library exports CreateEpFactories), which accepts every CUDA V2 option.
std::string AppendCudaPlugin(const ExecutionProviderOptions& provider, Ort::SessionOptions& session) {
  std::string error = EnsureCudaPluginRegistered();
  if (!error.empty()) return error;
  const int device_id = DeviceIdOption(provider);
  std::vector<Ort::ConstEpDevice> cuda_devices;
  for (const auto& device : SharedOrtEnv().GetEpDevices()) {
    if (std::string(device.EpName()) == kCuda) cuda_devices.push_back(device);
  }
  // The CUDA factory offers one device per CUDA ordinal, in ordinal order.
  // None at all (a driver but no GPU, or CUDA_VISIBLE_DEVICES empty) means
  // CUDA is not available here, said in the words of a missing provider.
  if (cuda_devices.empty()) {
    return std::string(kCuda) + " is not available: no CUDA device is visible (the provider library " +
           LibraryFile("cuda") + " loaded, but it lists 0 CUDA devices)";
  }
  if (device_id < 0 || device_id >= static_cast<int>(cuda_devices.size())) {
    return std::string(kCuda) + ": GPU " + std::to_string(device_id) + " does not exist (" +
           std::to_string(cuda_devices.size()) + " CUDA device(s) visible)";
  }
  session.AppendExecutionProvider_V2(SharedOrtEnv(), {cuda_devices[device_id]}, OptionMap(provider));
  return {};
}

// The TensorRT library has no plugin-EP entry point: a CPU-only core loads it
// through the legacy OrtTensorRTProviderOptions struct, which lacks the newer
// options (profiles, timing cache, builder level): those fail clearly.
std::string AppendTensorRtLegacy(const ExecutionProviderOptions& provider, Ort::SessionOptions& session) {
  OrtTensorRTProviderOptions trt{};
  trt.trt_max_partition_iterations = 1000;
  trt.trt_min_subgraph_size = 1;
  trt.trt_max_workspace_size = size_t{1} << 30;
  std::string engine_cache_path;  // outlives the append call below
  auto flag = [](const std::string& v) { return v == "1" || v == "true" || v == "True" ? 1 : 0; };
  for (const auto& [key, value] : provider.options) {
    long long n = 0;
    const bool numeric =
        std::from_chars(value.data(), value.data() + value.size(), n).ec == std::errc();
    if (key == "device_id" && numeric) trt.device_id = static_cast<int>(n);
    else if (key == "trt_max_workspace_size" && numeric) trt.trt_max_workspace_size = static_cast<size_t>(n);
    else if (key == "trt_fp16_enable") trt.trt_fp16_enable = flag(value);
    else if (key == "trt_engine_cache_enable") trt.trt_engine_cache_enable = flag(value);
    else if (key == "trt_engine_cache_path") engine_cache_path = value;
    else if (key == "trt_min_subgraph_size" && numeric) trt.trt_min_subgraph_size = static_cast<int>(n);
    else if (key == "trt_max_partition_iterations" && numeric) trt.trt_max_partition_iterations = static_cast<int>(n);
    else if (key == "trt_dump_subgraphs") trt.trt_dump_subgraphs = flag(value);
    else
      return std::string(kTensorRt) + " option '" + key + "=" + value +
             "' needs an ONNX Runtime built with TensorRT (this core loads " + LibraryFile("tensorrt") +
             " through the legacy options struct; see docs/gpu.md)";
  }
  if (!engine_cache_path.empty()) trt.trt_engine_cache_path = engine_cache_path.c_str();
  session.AppendExecutionProvider_TensorRT(trt);
  return {};
}

// Appends one GPU provider; returns an empty string on success, else why not.
std::string TryAppend(const std::string& name, const ExecutionProviderOptions& provider,
                      const std::vector<std::string>& available, Ort::SessionOptions& session) {
  const char* ort_name = name == "cuda" ? kCuda : kTensorRt;
  const bool compiled_in = std::find(available.begin(), available.end(), ort_name) != available.end();
  std::error_code ec;
  if (!compiled_in && !std::filesystem::exists(OrtLibraryDir() + "/" + LibraryFile(name), ec)) {
    return MissingProvider(ort_name, name, available);
  }
  if (name == "tensorrt") {
    // TensorRT creates only the last path component; the cache directories
    // live under a per-model tree that may not exist yet.
    for (const auto& [key, value] : provider.options) {
      if ((key == "trt_engine_cache_path" || key == "trt_timing_cache_path") && !value.empty()) {
        std::filesystem::create_directories(value, ec);
        if (ec) return std::string(ort_name) + ": cannot create " + key + " '" + value + "': " + ec.message();
      }
    }
  }
  try {
    if (!compiled_in) {
      return name == "cuda" ? AppendCudaPlugin(provider, session) : AppendTensorRtLegacy(provider, session);
    }
    if (name == "cuda") {
      Ort::CUDAProviderOptions cuda;
      cuda.Update(OptionMap(provider));
      session.AppendExecutionProvider_CUDA_V2(*cuda);
    } else {
      Ort::TensorRTProviderOptions tensorrt;
      tensorrt.Update(OptionMap(provider));
      session.AppendExecutionProvider_TensorRT_V2(*tensorrt);
    }
  } catch (const Ort::Exception& e) {
    return std::string("ONNX Runtime could not add ") + ort_name + ": " + e.what();
  }
  return {};
}

}  // namespace

std::string OrtLibraryDir() {
  static const std::string dir = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&OrtGetApiBase), &info) == 0 || info.dli_fname == nullptr)
      return std::string(".");
    return std::filesystem::path(info.dli_fname).parent_path().string();
  }();
  return dir;
}

std::string EnsureCudaPluginRegistered() {
  static std::once_flag once;
  static std::string error;  // written once, under `once`
  std::call_once(once, [] {
    const std::string path = OrtLibraryDir() + "/" + LibraryFile("cuda");
    try {
      SharedOrtEnv().RegisterExecutionProviderLibrary("ortserve_cuda", path);
      spdlog::info("registered the CUDA execution provider library {}", path);
    } catch (const Ort::Exception& e) {
      error = std::string(kCuda) + " is not available: cannot load " + path + ": " + e.what() +
              " (CUDA 13, cuDNN 9 libraries must be on the loader path, see docs/gpu.md)";
    }
  });
  return error;
}

Result<std::vector<std::string>> AppendExecutionProviders(const RuntimeOptions& options,
                                                           Ort::SessionOptions& session) {
  const std::vector<std::string> available = AvailableExecutionProviders();
  std::vector<std::string> requested;
  std::vector<std::string> used;
  std::vector<std::string> skipped;  // "name: reason" for each provider dropped by fallback
  bool cpu_listed = false;
  for (const auto& provider : options.execution_providers) {
    const std::string name = Lower(provider.name);
    requested.push_back(provider.name);
    if (cpu_listed) {
      // CPU runs every operator, so nothing would ever reach a provider
      // listed after it; an order like that is a config mistake.
      return InvalidArgument("model '" + options.label + "': execution provider '" + provider.name +
                             "' is listed after 'cpu' and could never run anything");
    }
    std::string failure;
    if (name == "cpu") {
      // ORT always registers the CPU provider last; nothing to append.
      cpu_listed = true;
      if (!provider.options.empty())
        spdlog::warn("{}: options for the cpu execution provider are ignored", options.label);
      continue;
    } else if (name == "cuda" || name == "tensorrt") {
      failure = TryAppend(name, provider, available, session);
      if (failure.empty()) {
        used.push_back(name == "cuda" ? kCuda : kTensorRt);
        continue;
      }
    } else {
      failure = "unknown execution provider '" + provider.name + "' (known: cpu, cuda, tensorrt)";
    }
    if (!options.allow_fallback)
      return Unavailable("model '" + options.label + "': " + failure);
    skipped.push_back(provider.name + ": " + failure);
  }
  used.push_back(kCpu);
  if (!skipped.empty()) {
    spdlog::warn("{}: EXECUTION PROVIDER FALLBACK: requested [{}] but the session runs on [{}]; "
                 "dropped: {}",
                 options.label, Join(requested), Join(used), Join(skipped));
  }
  return used;
}

}  // namespace ortserve
