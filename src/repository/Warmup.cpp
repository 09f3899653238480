#include "repository/Warmup.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <set>

#include "config/ConfigTypes.h"
#include "config/ModelFiles.h"
#include "config/RaggedConfig.h"
#include "scheduler/SequenceControls.h"
#include "scheduler/SequenceStates.h"
#include "scheduler/TensorStacker.h"
#include "serving/ShapeBuckets.h"

namespace ortserve {
namespace {

const inference::ModelInput* FindInput(const inference::ModelConfig& config, const std::string& name) {
  for (const auto& in : config.input()) {
    if (in.name() == name) return &in;
  }
  return nullptr;
}

// A server-fed input (a sequence model's control or state input) named
// `name`, as a config input of its data type; nullopt when there is none.
std::optional<inference::ModelInput> FindFedInput(const SequencePolicy* sequence, const std::string& name) {
  if (sequence == nullptr) return std::nullopt;
  std::optional<DataType> dtype;
  for (const ControlInput& c : sequence->controls)
    if (c.name == name) dtype = c.dtype;
  for (const StateTensor& s : sequence->states)
    if (s.input_name == name) dtype = s.dtype;
  if (!dtype) return std::nullopt;
  inference::ModelInput in;
  in.set_name(name);
  in.set_data_type(ToConfigDataType(*dtype));
  return in;
}

// Adds the server-fed inputs the sample does not have, for `rows` rows.
void AddFedInputs(const SequencePolicy& sequence, bool batching, uint64_t rows, WarmupSample* sample) {
  std::vector<Tensor> fed = SequenceControls(sequence, batching).ForRows({.start = true, .end = false, .ready = true}, rows);
  for (Tensor& t : InitialStateRows(sequence, batching, rows)) fed.push_back(std::move(t));
  for (Tensor& t : fed) {
    if (FindTensor(sample->inputs, t.name) == nullptr) sample->inputs.push_back(std::move(t));
  }
}

// Config dims -> request shape, -1 -> 1.
Shape ConcreteDims(const Shape& dims, bool* guessed) {
  Shape out = dims;
  for (auto& d : out) {
    if (d < 0) {
      d = 1;
      *guessed = true;
    }
  }
  return out;
}

struct SampleSize {
  uint64_t elements;
  uint64_t bytes;  // for BYTES: one empty string (its 4-byte length prefix) per element
};

// The size of a warm-up tensor; nullopt when the element count or the byte
// size does not fit in 64 bits (dims come from the config file).
std::optional<SampleSize> SizeOfSample(DataType type, const Shape& shape) {
  const std::optional<uint64_t> elements = ElementCount(shape);
  if (!elements) return std::nullopt;
  const std::optional<uint64_t> bytes =
      CheckedMultiply(*elements, type == DataType::kBytes ? uint64_t{4} : DataTypeSize(type));
  if (!bytes) return std::nullopt;
  return SampleSize{*elements, *bytes};
}

// `field` names the config field whose dims made the tensor too large.
Status SampleTooLarge(const std::string& sample, const std::string& field, const Shape& dims,
                      DataType type, const Shape& shape) {
  return InvalidArgument("warm-up '" + sample + "': " + field + " " + ShapeToString(dims) +
                         " give a " + std::string(DataTypeName(type)) + " tensor of shape " +
                         ShapeToString(shape) + ", over 2^64 elements or bytes");
}

// Zero bytes: zeros, or for BYTES empty strings.
std::vector<std::byte> ZeroData(const SampleSize& size) {
  return std::vector<std::byte>(size.bytes);
}

std::vector<std::byte> RandomData(DataType type, const SampleSize& size, std::mt19937* rng) {
  if (type == DataType::kBytes) return ZeroData(size);
  const uint64_t count = size.elements;
  std::vector<std::byte> bytes(size.bytes);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  switch (type) {
    case DataType::kBool:
      for (auto& b : bytes) b = static_cast<std::byte>(byte(*rng) & 1);
      break;
    case DataType::kFp32:
      for (uint64_t i = 0; i < count; ++i) {
        float v = unit(*rng);
        std::memcpy(bytes.data() + i * 4, &v, 4);
      }
      break;
    case DataType::kFp64:
      for (uint64_t i = 0; i < count; ++i) {
        double v = unit(*rng);
        std::memcpy(bytes.data() + i * 8, &v, 8);
      }
      break;
    case DataType::kFp16:
    case DataType::kBf16:
      // Small positive values: random low byte, high byte well below the exponent
      // range that would give inf/NaN.
      for (uint64_t i = 0; i < count; ++i) {
        bytes[i * 2] = static_cast<std::byte>(byte(*rng));
        bytes[i * 2 + 1] = static_cast<std::byte>(byte(*rng) % 0x3C);
      }
      break;
    default:
      for (auto& b : bytes) b = static_cast<std::byte>(byte(*rng));
      break;
  }
  return bytes;
}

// Applies the config reshape of `in` to a request-level shape.
Result<Shape> ModelShape(const inference::ModelInput& in, bool batching, const Shape& shape) {
  if (!in.has_reshape()) return shape;
  Shape target = ConfigDims(in.reshape().shape());
  if (batching) target.insert(target.begin(), shape[0]);
  return ReshapeDims(shape, target);
}

// The bytes of input_data_file (under <model_dir>/warmup/) for tensor `t`
// of `size`: exactly its bytes, or its element count of BYTES strings.
Result<std::vector<std::byte>> ReadInputDataFile(const std::string& sample, const std::filesystem::path& model_dir,
                                                 const std::string& file_name, const Tensor& t, const SampleSize& size) {
  auto path = ResolveInside(model_dir / "warmup", file_name);
  if (!path.ok()) {
    return InvalidArgument("warm-up '" + sample + "': input '" + t.name + "': " + path.status().message());
  }
  std::ifstream file(path.value(), std::ios::binary);
  if (!file) return InvalidArgument("warm-up '" + sample + "': cannot read " + path.value().string());
  std::vector<char> raw((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(raw.size());
  if (!raw.empty()) std::memcpy(bytes.data(), raw.data(), raw.size());
  if (t.dtype == DataType::kBytes) {
    auto elements = CountBytesElements(bytes.data(), bytes.size());
    if (!elements || *elements != size.elements) {
      return InvalidArgument("warm-up '" + sample + "': " + file_name + " does not hold " +
                             std::to_string(size.elements) + " length-prefixed strings");
    }
  } else if (bytes.size() != size.bytes) {
    return InvalidArgument("warm-up '" + sample + "': " + file_name + " has " + std::to_string(bytes.size()) +
                           " bytes, shape " + ShapeToString(t.shape) + " needs " + std::to_string(size.bytes));
  }
  return bytes;
}

Result<WarmupSample> FromConfig(const inference::ModelConfig& config, const inference::ModelWarmup& w,
                                const std::filesystem::path& model_dir, const SequencePolicy* sequence,
                                std::mt19937* rng) {
  WarmupSample sample;
  sample.name = w.name().empty() ? "warmup" : w.name();
  sample.count = w.count() > 0 ? static_cast<int>(w.count()) : 1;
  const bool batching = config.max_batch_size() > 0;
  if (batching && (w.batch_size() < 1 || static_cast<int>(w.batch_size()) > config.max_batch_size())) {
    return InvalidArgument("warm-up '" + sample.name + "': batch_size " +
                           std::to_string(w.batch_size()) + " is outside [1, " +
                           std::to_string(config.max_batch_size()) + "]");
  }
  for (const auto& [name, spec] : w.inputs()) {
    const inference::ModelInput* in = FindInput(config, name);
    const std::optional<inference::ModelInput> fed = in ? std::nullopt : FindFedInput(sequence, name);
    if (fed) in = &*fed;
    if (in == nullptr) {
      return InvalidArgument("warm-up '" + sample.name + "': '" + name + "' is not a model input");
    }
    Tensor t;
    t.name = name;
    t.dtype = FromConfigDataType(spec.data_type());
    if (spec.data_type() != in->data_type()) {
      return InvalidArgument("warm-up '" + sample.name + "': input '" + name + "' has data_type " +
                             inference::DataType_Name(spec.data_type()) + ", the model expects " +
                             inference::DataType_Name(in->data_type()));
    }
    t.shape = ConfigDims(spec.dims());
    for (int64_t d : t.shape) {
      if (d < 0) {
        return InvalidArgument("warm-up '" + sample.name + "': input '" + name +
                               "' needs concrete dims, got " + ShapeToString(t.shape));
      }
    }
    if (batching) t.shape.insert(t.shape.begin(), static_cast<int64_t>(w.batch_size()));
    const std::optional<SampleSize> size = SizeOfSample(t.dtype, t.shape);
    if (!size) {
      return SampleTooLarge(sample.name, "model_warmup.inputs['" + name + "'].dims",
                            ConfigDims(spec.dims()), t.dtype, t.shape);
    }
    std::vector<std::byte> bytes;
    switch (spec.input_data_type_case()) {
      case inference::ModelWarmup::Input::kRandomData:
        bytes = RandomData(t.dtype, *size, rng);
        break;
      case inference::ModelWarmup::Input::kInputDataFile: {
        auto read = ReadInputDataFile(sample.name, model_dir, spec.input_data_file(), t, *size);
        if (!read.ok()) return read.status();
        bytes = std::move(read).value();
        break;
      }
      default:
        bytes = ZeroData(*size);
        break;
    }
    auto shape = ModelShape(*in, batching, t.shape);
    if (!shape.ok()) return InvalidArgument("warm-up '" + sample.name + "': " + shape.status().message());
    t.shape = std::move(shape).value();
    t.data = TensorData::FromVector(std::move(bytes));
    sample.inputs.push_back(std::move(t));
  }
  if (sequence) AddFedInputs(*sequence, batching, batching ? w.batch_size() : 1, &sample);
  return sample;
}

Result<WarmupSample> Default(const inference::ModelConfig& config, int batch_size) {
  WarmupSample sample;
  const bool batching = config.max_batch_size() > 0;
  sample.name = batching ? "default batch " + std::to_string(batch_size) : "default";
  for (const auto& in : config.input()) {
    Tensor t;
    t.name = in.name();
    t.dtype = FromConfigDataType(in.data_type());
    if (t.dtype == DataType::kBytes) sample.best_effort = true;
    t.shape = ConcreteDims(ConfigDims(in.dims()), &sample.best_effort);
    if (batching) t.shape.insert(t.shape.begin(), batch_size);
    const std::optional<SampleSize> size = SizeOfSample(t.dtype, t.shape);
    if (!size) {
      return SampleTooLarge(sample.name, "input['" + in.name() + "'].dims", ConfigDims(in.dims()),
                            t.dtype, t.shape);
    }
    auto bytes = ZeroData(*size);
    auto shape = ModelShape(in, batching, t.shape);
    if (!shape.ok()) return InvalidArgument("warm-up: " + shape.status().message());
    t.shape = std::move(shape).value();
    t.data = TensorData::FromVector(std::move(bytes));
    sample.inputs.push_back(std::move(t));
  }
  return sample;
}

// Each sample once per bucket its padded inputs fit, padded as admission pads
// a request (ShapeBuckets::PadTensor), so that every bucket is warmed at
// every warmed batch size. A sample over the largest bucket stays as it is.
std::vector<WarmupSample> PerBucket(const ShapeBuckets& buckets, std::vector<WarmupSample> samples) {
  const size_t axis = buckets.axis();
  std::vector<WarmupSample> out;
  for (WarmupSample& sample : samples) {
    auto padded = std::find_if(sample.inputs.begin(), sample.inputs.end(), [&](const Tensor& t) {
      return buckets.FindPadded(t.name) != nullptr && t.shape.size() > axis;
    });
    if (padded == sample.inputs.end() || !buckets.BucketFor(padded->shape[axis])) {
      out.push_back(std::move(sample));
      continue;
    }
    const int64_t length = padded->shape[axis];
    for (int64_t size : buckets.sizes()) {
      if (size < length) continue;
      WarmupSample bucketed = sample;
      bucketed.name += " bucket " + std::to_string(size);
      for (Tensor& t : bucketed.inputs) {
        const ShapeBuckets::PaddedInput* p = buckets.FindPadded(t.name);
        if (p != nullptr && t.shape.size() > axis && t.shape[axis] <= size) {
          t = ShapeBuckets::PadTensor(t, axis, size, p->pad);
        }
      }
      out.push_back(std::move(bucketed));
    }
  }
  return out;
}

Result<std::vector<WarmupSample>> UnbucketedSamples(const inference::ModelConfig& config,
                                                    const std::filesystem::path& model_dir,
                                                    const SequencePolicy* sequence) {
  std::vector<WarmupSample> samples;
  std::mt19937 rng(12345);  // deterministic: warm-up must be reproducible
  if (config.model_warmup_size() > 0) {
    for (const auto& w : config.model_warmup()) {
      auto sample = FromConfig(config, w, model_dir, sequence, &rng);
      if (!sample.ok()) return sample.status();
      samples.push_back(std::move(sample).value());
    }
    return samples;
  }
  std::set<int> sizes;
  if (config.max_batch_size() > 0) {
    sizes.insert(1);
    sizes.insert(config.max_batch_size());
    for (const auto* preferred : {&config.dynamic_batching().preferred_batch_size(),
                                  &config.sequence_batching().oldest().preferred_batch_size()}) {
      for (int p : *preferred) {
        if (p >= 1 && p <= config.max_batch_size()) sizes.insert(p);
      }
    }
  } else {
    sizes.insert(0);
  }
  for (int size : sizes) {
    auto sample = Default(config, size);
    if (!sample.ok()) return sample.status();
    if (sequence) {
      AddFedInputs(*sequence, size > 0, size > 0 ? static_cast<uint64_t>(size) : 1, &sample.value());
      // A stateful model's zeros are rarely a valid step (Silero VAD takes a
      // sample rate of 0 down a branch that fails), so only a configured
      // model_warmup is strict for it.
      sample->best_effort = true;
    }
    samples.push_back(std::move(sample).value());
  }
  return samples;
}

// A ragged model takes each sample as a batch of one request: its ragged
// inputs flattened to 1-D and its batch inputs made, as the batcher does.
Status ShapeAsRaggedBatches(const RaggedBatching& ragged, std::vector<WarmupSample>* samples) {
  TensorStacker stacker;
  for (WarmupSample& sample : *samples) {
    InferenceRequest request;
    request.id = "warm-up " + sample.name;
    request.inputs = std::move(sample.inputs);
    std::vector<Tensor> batch;
    ORTSERVE_RETURN_IF_ERROR(stacker.Stack({&request}, &batch, &ragged));
    ORTSERVE_RETURN_IF_ERROR(AppendBatchInputs(ragged, {&request}, &batch));
    sample.inputs = std::move(batch);
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<WarmupSample>> BuildWarmupSamples(const inference::ModelConfig& config,
                                                     const std::filesystem::path& model_dir,
                                                     const SequencePolicy* sequence) {
  auto samples = UnbucketedSamples(config, model_dir, sequence);
  if (!samples.ok()) return samples.status();
  auto buckets = ShapeBuckets::FromConfig(config);
  if (!buckets.ok()) return buckets.status();
  if (buckets.value()) samples = PerBucket(*buckets.value(), std::move(samples).value());
  if (auto ragged = MakeRaggedBatching(config)) {
    ORTSERVE_RETURN_IF_ERROR(ShapeAsRaggedBatches(*ragged, &samples.value()));
  }
  return samples;
}

}  // namespace ortserve
