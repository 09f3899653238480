#pragma once
// What the benchmark programs share (ortserve_inprocess_limit,
// ortserve_gpu_baseline, ortserve_http_load): failing with a message,
// the --input NAME:DTYPE:DIMS:FILE tensors, batching them, and the latency
// summary every bench tool prints (the schema of bench/lib/inprocess_ort.py).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/DataType.h"
#include "core/Tensor.h"
#include "server/json/JsonWriter.h"

namespace ortserve::bench {

using Clock = std::chrono::steady_clock;

// The program's name in its error messages; set first thing in main().
inline const char*& ProgramName() {
  static const char* name = "bench";
  return name;
}

[[noreturn]] inline void Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", ProgramName(), message.c_str());
  std::exit(2);
}

inline std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  return parts;
}

inline std::vector<std::byte> ReadFileBytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) Fail("cannot read " + path);
  std::vector<std::byte> bytes;
  for (std::istreambuf_iterator<char> it(file), end; it != end; ++it) bytes.push_back(static_cast<std::byte>(*it));
  return bytes;
}

// One request's tensor from NAME:DTYPE:DIMS:FILE (DIMS 'x'-separated, the
// batch dimension first; FILE the raw little-endian elements).
inline Tensor ReadInput(const std::string& spec) {
  const std::vector<std::string> parts = Split(spec, ':');
  if (parts.size() != 4) Fail("--input must be NAME:DTYPE:DIMS:FILE, got " + spec);
  Tensor t;
  t.name = parts[0];
  const auto dtype = DataTypeFromName(parts[1]);
  if (!dtype) Fail("unknown data type " + parts[1]);
  t.dtype = *dtype;
  for (const std::string& d : Split(parts[2], 'x')) t.shape.push_back(std::stoll(d));
  if (t.shape.empty() || t.shape[0] < 1) Fail("--input " + spec + ": DIMS must start with the batch dimension");
  t.data = TensorData::FromVector(ReadFileBytes(parts[3]));
  return t;
}

// `one` repeated `batch` times along dimension 0.
inline Tensor Repeat(const Tensor& one, int batch) {
  Tensor t = one;
  t.shape[0] *= batch;
  std::vector<std::byte> bytes;
  bytes.reserve(one.data.size() * batch);
  for (int i = 0; i < batch; ++i) bytes.insert(bytes.end(), one.data.data(), one.data.data() + one.data.size());
  t.data = TensorData::FromVector(std::move(bytes));
  return t;
}

// Walks argv: a flag named in `switches` stands alone (set gets ""), every
// other takes the next argument as its value. A std::stoi / std::stod that
// throws inside `set` fails with the flag and value named; so does a flag
// without its value. `set(flag, value)` fails itself on an unknown flag.
template <typename Set>
void ParseFlags(int argc, char** argv, std::initializer_list<std::string_view> switches, Set&& set) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool is_switch = std::find(switches.begin(), switches.end(), flag) != switches.end();
    if (!is_switch && i + 1 >= argc) Fail(flag + " needs a value");
    const std::string value = is_switch ? std::string() : argv[++i];
    try {
      set(flag, value);
    } catch (const std::logic_error&) {
      Fail("bad value '" + value + "' for " + flag);
    }
  }
}

// --duration and --warmup, as every bench program takes them.
inline void CheckWindow(double duration_s, double warmup_s) {
  if (!(duration_s > 0) || warmup_s < 0) Fail("--duration must be positive and --warmup not negative");
}

inline std::vector<int> ParseBatchSizes(const std::string& text);

// What the in-process programs run: a model, one request's inputs, the
// batch sizes and the measurement window.
struct RunFlags {
  std::string model_path;
  std::vector<int> batch_sizes{1};
  double duration_s = 10.0;
  double warmup_s = 1.0;
  std::vector<Tensor> inputs;  // one request's tensors (--input NAME:DTYPE:DIMS:FILE)

  // Applies --model-path, --batch-sizes, --duration, --warmup or --input;
  // false for any other flag.
  bool Set(const std::string& flag, const std::string& value) {
    if (flag == "--model-path") model_path = value;
    else if (flag == "--batch-sizes") batch_sizes = ParseBatchSizes(value);
    else if (flag == "--duration") duration_s = std::stod(value);
    else if (flag == "--warmup") warmup_s = std::stod(value);
    else if (flag == "--input") inputs.push_back(ReadInput(value));
    else return false;
    return true;
  }

  void Check() const {
    if (model_path.empty() || inputs.empty()) Fail("--model-path and at least one --input are required");
    CheckWindow(duration_s, warmup_s);
  }
};

// Comma-separated positive integers ("1,8,32"), sorted, without repeats.
inline std::vector<int> ParseBatchSizes(const std::string& text) {
  std::vector<int> sizes;
  for (const std::string& b : Split(text, ',')) {
    const int n = std::stoi(b);
    if (n < 1) Fail("batch sizes must be at least 1 each, got " + text);
    sizes.push_back(n);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

inline Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Nearest-rank percentile of sorted values.
inline double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(q / 100.0 * (sorted.size() - 1) + 0.5));
  return sorted[i];
}

// `key`: {"p50": .., "p90": .., "p95": .., "p99": ..} of sorted latencies.
inline void WritePercentiles(JsonWriter& json, const char* key, const std::vector<double>& sorted_us) {
  json.Key(key);
  json.StartObject();
  for (int q : {50, 90, 95, 99}) {
    json.Key("p" + std::to_string(q));
    json.Float(Percentile(sorted_us, q));
  }
  json.EndObject();
}

// One batch size's back-to-back runs: `run` once per iteration, first for
// `warmup_s`, then for `duration_s`, timed one by one. Writes the result
// object of bench/lib/inprocess_ort.py's schema.
template <typename Run>
void MeasureBackToBack(Run&& run, int batch, double warmup_s, double duration_s, JsonWriter& json) {
  for (const Clock::time_point warm_end = Clock::now() + Seconds(warmup_s); Clock::now() < warm_end;) run();
  std::vector<double> latency_us;
  const Clock::time_point start = Clock::now();
  const Clock::time_point end = start + Seconds(duration_s);
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
  WritePercentiles(json, "run_latency_us", latency_us);
  json.Key("mean_run_us");
  json.Float(total_us / latency_us.size());
  json.EndObject();
}

}  // namespace ortserve::bench
