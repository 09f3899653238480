// The limit, measured with the server's own runtime: ONNX Runtime in process,
// back-to-back Run calls, no server. It builds its session exactly as an
// ortserve CPU instance does (CreateOrtModelInstance, the same libonnxruntime
// and session options), so the ratio ortserve / this measures the server and
// nothing else: not a different ORT version, not Python's per-call overhead.
//
// Usually driven by bench/lib/inprocess_ort.py, which writes the inputs:
//   ortserve_inprocess_limit --model-path model.onnx --threads 2
//       --input INPUT0:FP32:1x3x64x64:input0.bin [--input ...]
//       [--batch-sizes 1,4] [--duration 10] [--warmup 1] [--spinning]
// Each --input is one request's tensor (raw little-endian bytes, its shape
// with the batch dimension first). For batch size b the tensor is repeated b
// times along dimension 0. Prints one JSON object (the schema of
// inprocess_ort.py): per batch size, runs, inferences/s, run latency
// percentiles in microseconds.
#include <cstdio>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bench_program.h"
#include "core/Tensor.h"
#include "runtime/OrtModelInstance.h"
#include "server/json/JsonWriter.h"

namespace {

using ortserve::Tensor;
using ortserve::bench::Fail;

struct Args {
  ortserve::bench::RunFlags run;
  int threads = 2;
  bool spinning = false;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  ortserve::bench::ParseFlags(argc, argv, {"--spinning"}, [&](const std::string& flag, const std::string& value) {
    if (flag == "--spinning") args.spinning = true;
    else if (flag == "--threads") args.threads = std::stoi(value);
    else if (!args.run.Set(flag, value)) Fail("unknown flag " + flag);
  });
  args.run.Check();
  if (args.threads < 1) Fail("--threads must be at least 1");
  return args;
}

// Back-to-back runs of one batch size after a warm-up; writes its result
// object (inprocess_ort.py's schema) to `json`.
void MeasureBatch(ortserve::ModelInstance& model, const Args& args, int batch, ortserve::JsonWriter& json) {
  std::vector<Tensor> inputs;
  for (const Tensor& one : args.run.inputs) inputs.push_back(ortserve::bench::Repeat(one, batch));
  std::vector<Tensor> outputs;
  const auto run = [&] {
    outputs.clear();
    if (auto st = model.Run(inputs, &outputs); !st.ok()) Fail(st.message());
  };
  ortserve::bench::MeasureBackToBack(run, batch, args.run.warmup_s, args.run.duration_s, json);
}

}  // namespace

int main(int argc, char** argv) {
  ortserve::bench::ProgramName() = "ortserve_inprocess_limit";
  const Args args = ParseArgs(argc, argv);
  // Stdout carries the JSON result only; the runtime's log lines go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("inprocess"));
  ortserve::RuntimeOptions options;
  options.model_path = args.run.model_path;
  options.intra_op_threads = args.threads;
  options.allow_spinning = args.spinning;
  options.label = "inprocess";
  auto instance = ortserve::CreateOrtModelInstance(options);
  if (!instance.ok()) Fail(instance.status().message());

  std::string out;
  ortserve::JsonWriter json(&out);
  json.StartObject();
  json.Key("engine");
  json.String("ortserve-runtime");
  json.Key("threads");
  json.Int(args.threads);
  json.Key("onnxruntime");
  json.String(ortserve::OrtVersion());
  json.Key("results");
  json.StartArray();
  for (int batch : args.run.batch_sizes) MeasureBatch(*instance.value(), args, batch, json);
  json.EndArray();
  json.EndObject();
  std::printf("%s\n", out.c_str());
  return 0;
}
