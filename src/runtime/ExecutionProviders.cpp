#include "runtime/ExecutionProviders.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <unordered_map>

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

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

std::unordered_map<std::string, std::string> OptionMap(const ExecutionProviderOptions& provider) {
  return {provider.options.begin(), provider.options.end()};
}

// Appends one GPU provider; returns an empty string on success, else why not.
std::string TryAppend(const std::string& name, const ExecutionProviderOptions& provider,
                      const std::vector<std::string>& available, Ort::SessionOptions& session) {
  const char* ort_name = name == "cuda" ? kCuda : kTensorRt;
  if (std::find(available.begin(), available.end(), ort_name) == available.end()) {
    return std::string(ort_name) + " is not available in this ONNX Runtime build (available: " +
           Join(available) + ")";
  }
  try {
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
