// The limit, measured with the server's own runtime: ONNX Runtime in process,
// back-to-back Run calls, no server. It builds its session exactly as an
// ortserve CPU instance does (CreateOrtModelInstance, the same libonnxruntime
// and session options), so the ratio ortserve / this measures the server and
// nothing else: not a different ORT version, not Python's per-call overhead.
//
// Usually driven by bench/inprocess_ort.py, which writes the inputs:
//   ortserve_inprocess_limit --model-path model.onnx --threads 2
//       --input INPUT0:FP32:1x3x64x64:input0.bin [--input ...]
//       [--batch-sizes 1,4] [--duration 10] [--warmup 1] [--spinning]
// Each --input is one request's tensor (raw little-endian bytes, its shape
// with the batch dimension first). For batch size b the tensor is repeated b
// times along dimension 0. Prints one JSON object (the schema of
// inprocess_ort.py): per batch size, runs, inferences/s, run latency
// percentiles in microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/DataType.h"
#include "server/json/JsonWriter.h"
#include "core/Tensor.h"
#include "runtime/OrtModelInstance.h"

namespace {

using Clock = std::chrono::steady_clock;
using ortserve::Tensor;

struct Args {
  std::string model_path;
  int threads = 2;
  std::vector<int> batch_sizes{1};
  double duration_s = 10.0;
  double warmup_s = 1.0;
  bool spinning = false;
  std::vector<Tensor> inputs;  // one request's tensors (--input NAME:DTYPE:DIMS:FILE)
};

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "ortserve_inprocess_limit: %s\n", message.c_str());
  std::exit(2);
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}

// One request's tensor from NAME:DTYPE:DIMS:FILE (DIMS 'x'-separated, the
// batch dimension first; FILE the raw little-endian elements).
Tensor ReadInput(const std::string& spec) {
  const std::vector<std::string> parts = Split(spec, ':');
  if (parts.size() != 4) Fail("--input must be NAME:DTYPE:DIMS:FILE, got " + spec);
  Tensor t;
  t.name = parts[0];
  const auto dtype = ortserve::DataTypeFromName(parts[1]);
  if (!dtype) Fail("unknown data type " + parts[1]);
  t.dtype = *dtype;
  for (const std::string& d : Split(parts[2], 'x')) t.shape.push_back(std::stoll(d));
  if (t.shape.empty() || t.shape[0] < 1) Fail("--input " + spec + ": DIMS must start with the batch dimension");
  std::ifstream file(parts[3], std::ios::binary);
  if (!file) Fail("cannot read " + parts[3]);
  std::vector<std::byte> bytes;
  for (std::istreambuf_iterator<char> it(file), end; it != end; ++it) bytes.push_back(static_cast<std::byte>(*it));
  t.data = ortserve::TensorData::FromVector(std::move(bytes));
  return t;
}

// `one` repeated `batch` times along dimension 0.
Tensor Repeat(const Tensor& one, int batch) {
  Tensor t = one;
  t.shape[0] *= batch;
  std::vector<std::byte> bytes;
  bytes.reserve(one.data.size() * batch);
  for (int i = 0; i < batch; ++i) bytes.insert(bytes.end(), one.data.data(), one.data.data() + one.data.size());
  t.data = ortserve::TensorData::FromVector(std::move(bytes));
  return t;
}

void SetFlag(Args& args, const std::string& flag, const std::string& value) {
  if (flag == "--model-path") {
    args.model_path = value;
  } else if (flag == "--threads") {
    args.threads = std::stoi(value);
  } else if (flag == "--batch-sizes") {
    args.batch_sizes.clear();
    for (const std::string& b : Split(value, ',')) args.batch_sizes.push_back(std::stoi(b));
  } else if (flag == "--duration") {
    args.duration_s = std::stod(value);
  } else if (flag == "--warmup") {
    args.warmup_s = std::stod(value);
  } else if (flag == "--input") {
    args.inputs.push_back(ReadInput(value));
  } else {
    Fail("unknown flag " + flag);
  }
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--spinning") {
      args.spinning = true;
      continue;
    }
    if (i + 1 >= argc) Fail(flag + " needs a value");
    const std::string value = argv[++i];
    try {
      SetFlag(args, flag, value);
    } catch (const std::logic_error&) {  // std::stoi / std::stod
      Fail("bad value '" + value + "' for " + flag);
    }
  }
  if (args.model_path.empty() || args.inputs.empty()) Fail("--model-path and at least one --input are required");
  if (args.threads < 1) Fail("--threads must be at least 1");
  for (int b : args.batch_sizes) {
    if (b < 1) Fail("--batch-sizes must be at least 1 each");
  }
  if (!(args.duration_s > 0) || args.warmup_s < 0) Fail("--duration must be positive and --warmup not negative");
  return args;
}

double Percentile(const std::vector<double>& sorted, double q) {
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q / 100.0 * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

// Back-to-back runs of one batch size after a warm-up; writes its result
// object (inprocess_ort.py's schema) to `json`.
void MeasureBatch(ortserve::ModelInstance& model, const Args& args, int batch, ortserve::JsonWriter& json) {
  std::vector<Tensor> inputs;
  for (const Tensor& one : args.inputs) inputs.push_back(Repeat(one, batch));
  std::vector<Tensor> outputs;
  const auto run = [&] {
    outputs.clear();
    if (auto st = model.Run(inputs, &outputs); !st.ok()) Fail(st.message());
  };
  const auto seconds = [](double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); };
  for (const Clock::time_point warm_end = Clock::now() + seconds(args.warmup_s); Clock::now() < warm_end;) run();

  std::vector<double> latency_us;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + seconds(args.duration_s);
  Clock::time_point t = start;
  while (t < end) {
    run();
    const Clock::time_point t2 = Clock::now();
    latency_us.push_back(std::chrono::duration<double, std::micro>(t2 - t).count());
    t = t2;
  }
  const double elapsed_s = std::chrono::duration<double>(t - start).count();
  double total_us = 0;
  for (double l : latency_us) total_us += l;
  std::sort(latency_us.begin(), latency_us.end());

  json.StartObject();
  json.Key("batch_size");
  json.Int(batch);
  json.Key("runs");
  json.Int(latency_us.size());
  json.Key("elapsed_s");
  json.Float(elapsed_s);
  json.Key("inferences_per_s");
  json.Float(batch * latency_us.size() / elapsed_s);
  json.Key("run_latency_us");
  json.StartObject();
  for (int q : {50, 90, 95, 99}) {
    json.Key("p" + std::to_string(q));
    json.Float(Percentile(latency_us, q));
  }
  json.EndObject();
  json.Key("mean_run_us");
  json.Float(total_us / latency_us.size());
  json.EndObject();
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  // Stdout carries the JSON result only; the runtime's log lines go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("inprocess"));
  ortserve::RuntimeOptions options;
  options.model_path = args.model_path;
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
  std::vector<int> sizes = args.batch_sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (int batch : sizes) MeasureBatch(*instance.value(), args, batch, json);
  json.EndArray();
  json.EndObject();
  std::printf("%s\n", out.c_str());
  return 0;
}
