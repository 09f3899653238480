// The GPU limit, in process: ONNX Runtime's CUDA provider attached exactly as
// an ortserve GPU instance attaches it (runtime/ExecutionProviders), the
// inputs copied to device memory once, the outputs bound to fixed device
// buffers through Ort::IoBinding, then back-to-back Run calls: no host
// copies, no batching, no server. The GPU bundle's dynamic-batching check
// compares ortserve's throughput with this at the same batch sizes
// (bench/gpu/gpu_checks.py, docs/gpu.md); being a program of the bundle, it
// needs nothing on the GPU host but the CUDA libraries.
//   ortserve_gpu_baseline --model-path model.onnx --input INPUT0:FP32:1x3x64x64:input0.bin
//       [--input ...] [--batch-sizes 1,8,32] [--duration 3] [--warmup 1]
//       [--device-id 0] [--cuda-option use_tf32=0 ...] [--cuda-graph] [--cpu]
// Each --input is one request's tensor (raw little-endian bytes), repeated
// b times along dimension 0 for batch size b. --cuda-graph captures one CUDA
// graph per batch size and replays it. --cpu runs the same loop on the CPU
// provider with host buffers: for rehearsing the bundle on a machine without
// a GPU. Prints one JSON object, the schema of bench/lib/inprocess_ort.py.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bench_program.h"
#include "runtime/ExecutionProviders.h"
#include "runtime/OrtDataType.h"
#include "runtime/OrtEnvironment.h"
#include "runtime/OrtModelInstance.h"
#include "server/json/JsonWriter.h"

namespace {

using ortserve::Tensor;
using ortserve::bench::Fail;

struct Args {
  ortserve::bench::RunFlags run;
  int device_id = 0;
  std::vector<std::pair<std::string, std::string>> cuda_options;
  bool cuda_graph = false;
  bool cpu = false;
};

void SetFlag(Args& args, const std::string& flag, const std::string& value) {
  if (flag == "--cuda-graph") {
    args.cuda_graph = true;
  } else if (flag == "--cpu") {
    args.cpu = true;
  } else if (flag == "--device-id") {
    args.device_id = std::stoi(value);
  } else if (flag == "--cuda-option") {
    const size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0) Fail("--cuda-option must be KEY=VALUE, got " + value);
    args.cuda_options.emplace_back(value.substr(0, eq), value.substr(eq + 1));
  } else if (!args.run.Set(flag, value)) {
    Fail("unknown flag " + flag);
  }
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  args.run.duration_s = 3.0;
  ortserve::bench::ParseFlags(argc, argv, {"--cuda-graph", "--cpu"},
                              [&](const std::string& flag, const std::string& value) { SetFlag(args, flag, value); });
  args.run.Check();
  if (args.cpu && args.cuda_graph) Fail("--cuda-graph needs the CUDA provider, not --cpu");
  return args;
}

// The session options of a GPU instance's session: full graph optimization,
// sequential execution, and the CUDA provider appended by ortserve's own code.
Ort::SessionOptions SessionOptions(const Args& args) {
  Ort::SessionOptions session;
  session.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_ALL);
  session.SetExecutionMode(ExecutionMode::ORT_SEQUENTIAL);
  session.SetIntraOpNumThreads(1);
  if (args.cpu) return session;
  ortserve::RuntimeOptions options;
  options.label = "gpu-baseline";
  ortserve::ExecutionProviderOptions cuda{"cuda", {{"device_id", std::to_string(args.device_id)}}};
  for (const auto& option : args.cuda_options) cuda.options.push_back(option);
  if (args.cuda_graph) cuda.options.emplace_back("enable_cuda_graph", "1");
  options.execution_providers = {cuda};
  auto used = ortserve::AppendExecutionProviders(options, session);
  if (!used.ok()) Fail(used.status().message());
  return session;
}

Ort::Value HostView(const Tensor& t) {
  return Ort::Value::CreateTensor(Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault),
                                  const_cast<std::byte*>(t.data.data()), t.data.size(), t.shape.data(),
                                  t.shape.size(), ortserve::OrtElementType(t.dtype));
}

// Inputs of one batch size placed where the session computes (device memory,
// or host memory with --cpu), filled once.
std::vector<Ort::Value> PlaceInputs(const std::vector<Tensor>& host, Ort::Allocator& allocator, bool cpu) {
  std::vector<Ort::Value> views, placed;
  for (const Tensor& t : host) {
    views.push_back(HostView(t));
    placed.push_back(Ort::Value::CreateTensor(allocator, t.shape.data(), t.shape.size(),
                                              ortserve::OrtElementType(t.dtype)));
    if (cpu) std::memcpy(placed.back().GetTensorMutableRawData(), t.data.data(), t.data.size());
  }
  if (!cpu) {
    Ort::Status copied = ortserve::SharedOrtEnv().CopyTensors(views, placed, nullptr);
    if (!copied.IsOK()) Fail("copying the inputs to the device failed: " + copied.GetErrorMessage());
  }
  return placed;
}

void MeasureBatch(Ort::Session& session, const Args& args, int batch, int graph_id, ortserve::JsonWriter& json) {
  const Ort::MemoryInfo where =
      args.cpu ? Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault)
               : Ort::MemoryInfo("Cuda", OrtDeviceAllocator, args.device_id, OrtMemTypeDefault);
  Ort::Allocator allocator(session, where);
  std::vector<Tensor> host;
  for (const Tensor& one : args.run.inputs) host.push_back(ortserve::bench::Repeat(one, batch));
  std::vector<Ort::Value> inputs = PlaceInputs(host, allocator, args.cpu);

  Ort::IoBinding binding(session);
  for (size_t i = 0; i < inputs.size(); ++i) binding.BindInput(host[i].name.c_str(), inputs[i]);
  Ort::AllocatorWithDefaultOptions names;
  std::vector<std::string> output_names;
  for (size_t i = 0; i < session.GetOutputCount(); ++i)
    output_names.push_back(session.GetOutputNameAllocated(i, names).get());
  // A first run sizes the outputs; its buffers stay bound, so every later
  // run (and a captured graph) writes to the same device addresses.
  Ort::RunOptions run_options;
  if (args.cuda_graph) run_options.AddConfigEntry("gpu_graph_id", std::to_string(graph_id).c_str());
  for (const std::string& name : output_names) binding.BindOutput(name.c_str(), where);
  session.Run(run_options, binding);
  binding.SynchronizeOutputs();
  std::vector<Ort::Value> outputs = binding.GetOutputValues();
  binding.ClearBoundOutputs();
  for (size_t i = 0; i < outputs.size(); ++i) binding.BindOutput(output_names[i].c_str(), outputs[i]);

  const auto run = [&] {
    session.Run(run_options, binding);
    binding.SynchronizeOutputs();
  };
  ortserve::bench::MeasureBackToBack(run, batch, args.run.warmup_s, args.run.duration_s, json);
}

}  // namespace

int main(int argc, char** argv) {
  ortserve::bench::ProgramName() = "ortserve_gpu_baseline";
  const Args args = ParseArgs(argc, argv);
  // Stdout carries the JSON result only; the runtime's log lines go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("gpu-baseline"));
  std::string out;
  try {
    Ort::Session session(ortserve::SharedOrtEnv(), args.run.model_path.c_str(), SessionOptions(args));
    ortserve::JsonWriter json(&out);
    json.StartObject();
    json.Key("engine");
    json.String(args.cpu ? "ort-cpu-iobinding" : "ort-cuda-iobinding");
    json.Key("cuda_graph");
    json.Bool(args.cuda_graph);
    json.Key("onnxruntime");
    json.String(ortserve::OrtVersion());
    json.Key("results");
    json.StartArray();
    int graph_id = 1;
    for (int batch : args.run.batch_sizes) MeasureBatch(session, args, batch, graph_id++, json);
    json.EndArray();
    json.EndObject();
  } catch (const Ort::Exception& e) {
    Fail(std::string("ONNX Runtime: ") + e.what());
  }
  std::printf("%s\n", out.c_str());
  return 0;
}
