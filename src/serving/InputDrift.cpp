#include "serving/InputDrift.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sstream>

namespace ortserve {
namespace {

template <typename T>
T Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Calls f(value) for elements 0, stride, 2*stride, ... of the `elements`
// values of type T at `data`, each converted by `convert`: the element type
// is dispatched once per tensor, not once per value.
template <typename T, typename Convert, typename F>
void ForStrided(const std::byte* data, size_t elements, size_t stride, Convert&& convert, F&& f) {
  for (size_t i = 0; i < elements; i += stride) f(convert(Load<T>(data + sizeof(T) * i)));
}

template <typename T, typename F>
void ForStridedNumbers(const std::byte* data, size_t elements, size_t stride, F&& f) {
  ForStrided<T>(data, elements, stride, [](T v) { return static_cast<double>(v); }, f);
}

// Calls f(value) for at most kDriftValuesPerInput elements of `t`, evenly
// strided: numbers as numbers (BOOL as 0/1), BYTES elements by length.
template <typename F>
void ForSampledValues(const Tensor& t, F&& f) {
  const std::byte* data = t.data.data();
  const size_t size = t.data.size();
  if (t.dtype == DataType::kBytes) {
    // Lengths can only be found by walking the prefixes: take the first elements.
    size_t offset = 0;
    for (size_t n = 0; n < kDriftValuesPerInput && offset + 4 <= size; ++n) {
      const uint32_t length = Load<uint32_t>(data + offset);
      f(static_cast<double>(length));
      offset += 4 + static_cast<size_t>(length);
    }
    return;
  }
  const size_t width = DataTypeSize(t.dtype);
  if (width == 0) return;
  const size_t elements = size / width;
  const size_t stride = std::max<size_t>(1, (elements + kDriftValuesPerInput - 1) / kDriftValuesPerInput);
  switch (t.dtype) {
    case DataType::kBool:
      return ForStrided<uint8_t>(data, elements, stride, [](uint8_t v) { return v != 0 ? 1.0 : 0.0; }, f);
    case DataType::kUint8: return ForStridedNumbers<uint8_t>(data, elements, stride, f);
    case DataType::kUint16: return ForStridedNumbers<uint16_t>(data, elements, stride, f);
    case DataType::kUint32: return ForStridedNumbers<uint32_t>(data, elements, stride, f);
    case DataType::kUint64: return ForStridedNumbers<uint64_t>(data, elements, stride, f);
    case DataType::kInt8: return ForStridedNumbers<int8_t>(data, elements, stride, f);
    case DataType::kInt16: return ForStridedNumbers<int16_t>(data, elements, stride, f);
    case DataType::kInt32: return ForStridedNumbers<int32_t>(data, elements, stride, f);
    case DataType::kInt64: return ForStridedNumbers<int64_t>(data, elements, stride, f);
    case DataType::kFp16: return ForStrided<uint16_t>(data, elements, stride, HalfToFloat, f);
    case DataType::kFp32: return ForStridedNumbers<float>(data, elements, stride, f);
    case DataType::kFp64: return ForStridedNumbers<double>(data, elements, stride, f);
    case DataType::kBf16: return ForStrided<uint16_t>(data, elements, stride, Bf16ToFloat, f);
    default: return;
  }
}

std::string Number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : "nan";
}

// Edges of a sorted sample: its quantiles (at most bins-1, coinciding ones
// merged), then one just above its maximum, so that values above anything
// the reference saw have a bin of their own (a constant input gets three
// bins: below its value, the value, above it).
std::vector<double> QuantileEdges(const std::vector<double>& sorted, int bins) {
  std::vector<double> edges;
  if (sorted.empty()) return edges;
  for (int i = 1; i < bins; ++i) {
    const double e = sorted[sorted.size() * static_cast<size_t>(i) / static_cast<size_t>(bins)];
    if (edges.empty() || e > edges.back()) edges.push_back(e);
  }
  const double above_max = std::nextafter(sorted.back(), INFINITY);
  if (std::isfinite(above_max) && (edges.empty() || above_max > edges.back())) edges.push_back(above_max);
  if (edges.empty()) edges.push_back(sorted.back());  // the largest double: below it, and it
  return edges;
}

}  // namespace

DriftSampler::DriftSampler(double fraction) {
  const double scaled = std::ldexp(fraction, 64);
  all_ = !(scaled < 0x1p64);  // fraction 1 (or so close that the threshold would overflow)
  threshold_ = all_ ? 0 : static_cast<uint64_t>(scaled);
}

double PopulationStabilityIndex(std::span<const uint64_t> reference, std::span<const uint64_t> current) {
  uint64_t ref_total = 0, cur_total = 0;
  for (uint64_t c : reference) ref_total += c;
  for (uint64_t c : current) cur_total += c;
  if (ref_total == 0 || cur_total == 0 || reference.size() != current.size()) return 0.0;
  double psi = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double r = std::max(kDriftPsiEpsilon, static_cast<double>(reference[i]) / static_cast<double>(ref_total));
    const double c = std::max(kDriftPsiEpsilon, static_cast<double>(current[i]) / static_cast<double>(cur_total));
    psi += (c - r) * std::log(c / r);
  }
  return psi;
}

void DriftMoments::Add(double x) {
  ++count;
  const double delta = x - mean;
  mean += delta / static_cast<double>(count);
  m2 += delta * (x - mean);
}

void DriftMoments::Merge(const DriftMoments& o) {
  if (o.count == 0) return;
  if (count == 0) {
    *this = o;
    return;
  }
  const double n = static_cast<double>(count + o.count);
  const double delta = o.mean - mean;
  mean += delta * static_cast<double>(o.count) / n;
  m2 += o.m2 + delta * delta * static_cast<double>(count) * static_cast<double>(o.count) / n;
  count += o.count;
}

size_t DriftBin(std::span<const double> edges, double x) {
  // The number of edges <= x. Up to 64 edges (the default 10 bins have at
  // most 11) a branch-free count is faster than a binary search, whose
  // branches random values mispredict.
  if (edges.size() > 64) {
    return static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin());
  }
  // Four independent counts: one count would chain every comparison on the
  // last (a carry per edge, serially), four let them overlap.
  size_t counts[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= edges.size(); i += 4) {
    for (size_t k = 0; k < 4; ++k) counts[k] += edges[i + k] <= x ? 1 : 0;
  }
  for (; i < edges.size(); ++i) counts[0] += edges[i] <= x ? 1 : 0;
  return counts[0] + counts[1] + counts[2] + counts[3];
}

const DriftInputProfile* DriftProfile::Find(std::string_view name) const {
  for (const auto& input : inputs) {
    if (input.name == name) return &input;
  }
  return nullptr;
}

std::string WriteDriftProfile(const DriftProfile& profile) {
  std::string out = "ortserve-drift-profile 1\n";
  for (const auto& input : profile.inputs) {
    out += "input " + input.name + " " + std::to_string(input.moments.count) + " " + Number(input.moments.mean) +
           " " + Number(input.moments.m2);
    for (double e : input.edges) out += " " + Number(e);
    out += " |";
    for (uint64_t c : input.counts) out += " " + std::to_string(c);
    out += "\n";
  }
  return out;
}

Result<DriftProfile> ParseDriftProfile(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line) || line != "ortserve-drift-profile 1") {
    return InvalidArgument("drift profile: the first line must be 'ortserve-drift-profile 1'");
  }
  DriftProfile profile;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("drift profile line " + std::to_string(number) + ": " + why);
    };
    std::istringstream fields(line);
    std::string word;
    DriftInputProfile input;
    if (!(fields >> word) || word != "input" || !(fields >> input.name)) return bad("expected 'input <name> ...'");
    if (!(fields >> input.moments.count >> input.moments.mean >> input.moments.m2)) {
      return bad("expected count, mean and m2 after the input name");
    }
    while (fields >> word && word != "|") {
      double e = 0;
      auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), e);
      if (ec != std::errc() || end != word.data() + word.size() || !std::isfinite(e)) {
        return bad("edge '" + word + "' is not a finite number");
      }
      if (!input.edges.empty() && e <= input.edges.back()) return bad("edges must be strictly increasing");
      input.edges.push_back(e);
    }
    if (word != "|") return bad("expected '|' between the edges and the counts");
    while (fields >> word) {
      uint64_t c = 0;
      auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), c);
      if (ec != std::errc() || end != word.data() + word.size()) return bad("counts must be whole numbers");
      input.counts.push_back(c);
    }
    if (input.counts.size() != input.edges.size() + 1) return bad("needs one count more than edges");
    if (profile.Find(input.name)) return bad("input '" + input.name + "' appears twice");
    profile.inputs.push_back(std::move(input));
  }
  if (profile.inputs.empty()) return InvalidArgument("drift profile: no input lines");
  return profile;
}

std::shared_ptr<const DriftProfile> DriftSummary::AsProfile() const {
  if (!reference) return nullptr;
  auto profile = std::make_shared<DriftProfile>();
  for (const auto& input : inputs) {
    const DriftInputProfile* ref = reference->Find(input.name);
    if (!ref) continue;
    if (input.moments.count == 0) {
      profile->inputs.push_back(*ref);
    } else {
      profile->inputs.push_back(DriftInputProfile{input.name, input.moments, ref->edges, input.counts});
    }
  }
  return profile;
}

struct alignas(64) InputDrift::Shard {
  struct PerInput {
    DriftMoments baseline;         // while recording
    std::vector<double> sample;    // while recording: a reservoir, capacity reserved up front
    uint64_t sampled = 0;          // values offered to the reservoir
    DriftMoments current;          // once the reference is fixed
    std::vector<uint64_t> counts;  // over the reference's bins
  };
  std::atomic<uint64_t> served{0};  // admitted once the reference is fixed: the sampler's counter
  std::mutex mutex;
  std::vector<PerInput> inputs;
  uint64_t observed = 0;  // of `served`, those the sampler took
  uint64_t rng = 0x9e3779b97f4a7c15ULL;

  uint64_t Next() {  // xorshift64
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  }
};

namespace {

constexpr size_t kSamplePerShard = kDriftSampleSize / kDriftShards;

// One tensor's values as sums of (x - its first value): no division per
// value; merged into the shard's moments once per tensor.
struct ShiftedSums {
  uint64_t n = 0;
  double shift = 0, sum = 0, squares = 0;
  void Add(double x) {
    if (n++ == 0) shift = x;
    const double d = x - shift;
    sum += d;
    squares += d * d;
  }
  DriftMoments Moments() const {
    DriftMoments m;
    if (n == 0) return m;
    const double count = static_cast<double>(n);
    m.count = n;
    m.mean = shift + sum / count;
    m.m2 = std::max(0.0, squares - sum * sum / count);
    return m;
  }
};

size_t ThisThreadShard() {
  static std::atomic<size_t> next{0};
  thread_local const size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kDriftShards;
  return shard;
}

}  // namespace

InputDrift::InputDrift(const inference::ModelConfig& config, const DriftConfig& drift,
                       std::shared_ptr<const DriftProfile> reference)
    : baseline_requests_(reference ? 0 : drift.baseline_requests),
      bins_(drift.bins),
      sample_fraction_(drift.sample_fraction),
      sampler_(drift.sample_fraction),
      shards_(std::make_unique<Shard[]>(kDriftShards)) {
  for (const auto& input : config.input()) names_.push_back(input.name());
  reference_inputs_.assign(names_.size(), nullptr);
  for (size_t s = 0; s < kDriftShards; ++s) {
    shards_[s].rng += s * 0x2545f4914f6cdd1dULL;
    shards_[s].inputs.resize(names_.size());
    for (size_t k = 0; k < names_.size(); ++k) {
      const DriftInputProfile* ref = reference ? reference->Find(names_[k]) : nullptr;
      if (ref) shards_[s].inputs[k].counts.assign(ref->counts.size(), 0);
      if (!reference) shards_[s].inputs[k].sample.reserve(kSamplePerShard);
    }
  }
  if (reference) {
    for (size_t k = 0; k < names_.size(); ++k) reference_inputs_[k] = reference->Find(names_[k]);
    reference_holder_ = std::move(reference);
    reference_.store(reference_holder_.get(), std::memory_order_release);
  }
}

InputDrift::~InputDrift() = default;

void InputDrift::Observe(const InferenceRequest& request) {
  const DriftProfile* reference = reference_.load(std::memory_order_acquire);
  bool last_of_baseline = false;
  if (!reference) {
    const uint64_t n = requests_.fetch_add(1, std::memory_order_relaxed);
    if (n >= baseline_requests_) return;  // its last request is fixing the reference right now
    last_of_baseline = n + 1 == baseline_requests_;
  }
  Shard& shard = shards_[ThisThreadShard()];
  if (reference && !sampler_.Take(shard.served.fetch_add(1, std::memory_order_relaxed))) return;
  {
    std::lock_guard lock(shard.mutex);
    if (reference) ++shard.observed;
    for (size_t position = 0; position < request.inputs.size(); ++position) {
      const Tensor& t = request.inputs[position];
      const size_t k = InputIndex(t.name, position);
      if (k == names_.size()) continue;
      Shard::PerInput& acc = shard.inputs[k];
      const DriftInputProfile* ref = reference ? reference_inputs_[k] : nullptr;
      ShiftedSums tensor;
      ForSampledValues(t, [&](double x) {
        if (std::isnan(x)) return;
        if (!reference) {
          acc.baseline.Add(x);
          if (acc.sample.size() < kSamplePerShard) {
            acc.sample.push_back(x);
          } else if (const uint64_t j = shard.Next() % (acc.sampled + 1); j < kSamplePerShard) {
            acc.sample[j] = x;
          }
          ++acc.sampled;
          return;
        }
        tensor.Add(x);
        if (ref) ++acc.counts[DriftBin(ref->edges, x)];
      });
      acc.current.Merge(tensor.Moments());
    }
  }
  if (last_of_baseline) FreezeBaseline();
}

size_t InputDrift::InputIndex(const std::string& name, size_t position) const {
  // Clients mostly send the inputs in the config's order.
  if (position < names_.size() && names_[position] == name) return position;
  return static_cast<size_t>(std::find(names_.begin(), names_.end(), name) - names_.begin());
}

void InputDrift::FreezeBaseline() {
  std::lock_guard freeze(freeze_mutex_);
  if (reference_.load(std::memory_order_acquire)) return;
  auto profile = std::make_shared<DriftProfile>();
  profile->inputs.resize(names_.size());
  std::vector<std::vector<double>> samples(names_.size());
  for (size_t s = 0; s < kDriftShards; ++s) {
    std::lock_guard lock(shards_[s].mutex);
    for (size_t k = 0; k < names_.size(); ++k) {
      Shard::PerInput& acc = shards_[s].inputs[k];
      profile->inputs[k].moments.Merge(acc.baseline);
      samples[k].insert(samples[k].end(), acc.sample.begin(), acc.sample.end());
      std::vector<double>().swap(acc.sample);  // recording is over: give the reservoir back
    }
  }
  for (size_t k = 0; k < names_.size(); ++k) {
    DriftInputProfile& input = profile->inputs[k];
    input.name = names_[k];
    std::sort(samples[k].begin(), samples[k].end());
    input.edges = QuantileEdges(samples[k], bins_);
    input.counts.assign(input.edges.size() + 1, 0);
    for (double x : samples[k]) ++input.counts[DriftBin(input.edges, x)];
  }
  for (size_t s = 0; s < kDriftShards; ++s) {
    std::lock_guard lock(shards_[s].mutex);
    for (size_t k = 0; k < names_.size(); ++k) shards_[s].inputs[k].counts.assign(profile->inputs[k].counts.size(), 0);
  }
  for (size_t k = 0; k < names_.size(); ++k) reference_inputs_[k] = &profile->inputs[k];
  reference_holder_ = std::move(profile);
  reference_.store(reference_holder_.get(), std::memory_order_release);
}

DriftSummary InputDrift::Snapshot() const {
  DriftSummary out;
  out.baseline_requests = baseline_requests_;
  const DriftProfile* reference = reference_.load(std::memory_order_acquire);
  out.recording = reference == nullptr;
  out.sample_fraction = sample_fraction_;
  out.requests = std::min(requests_.load(std::memory_order_relaxed), baseline_requests_);
  out.observed_requests = out.requests;
  if (reference) {
    std::lock_guard freeze(freeze_mutex_);
    out.reference = reference_holder_;
  }
  out.inputs.resize(names_.size());
  for (size_t k = 0; k < names_.size(); ++k) {
    out.inputs[k].name = names_[k];
    if (reference && reference_inputs_[k]) out.inputs[k].counts.assign(reference_inputs_[k]->counts.size(), 0);
  }
  for (size_t s = 0; s < kDriftShards; ++s) {
    std::lock_guard lock(shards_[s].mutex);
    out.requests += shards_[s].served.load(std::memory_order_relaxed);
    out.observed_requests += shards_[s].observed;
    for (size_t k = 0; k < names_.size(); ++k) {
      const Shard::PerInput& acc = shards_[s].inputs[k];
      out.inputs[k].moments.Merge(acc.current);
      auto& counts = out.inputs[k].counts;
      for (size_t b = 0; b < counts.size() && b < acc.counts.size(); ++b) counts[b] += acc.counts[b];
    }
  }
  for (size_t k = 0; k < names_.size(); ++k) {
    if (reference && reference_inputs_[k]) {
      out.inputs[k].psi = PopulationStabilityIndex(reference_inputs_[k]->counts, out.inputs[k].counts);
    }
  }
  return out;
}

}  // namespace ortserve
