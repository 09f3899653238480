#include "serving/Classification.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>
#include <system_error>
#include <type_traits>

namespace ortserve {
namespace {

namespace fs = std::filesystem;

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// True when `path` names something inside `dir` (after resolving "..",
// symlinks of the parts that exist, and an absolute label_filename).
bool IsInside(const fs::path& path, const fs::path& dir) {
  std::error_code ec;
  const fs::path full = fs::weakly_canonical(path, ec);
  if (ec) return false;
  const fs::path base = fs::weakly_canonical(dir, ec);
  if (ec) return false;
  const fs::path relative = full.lexically_relative(base);
  return !relative.empty() && *relative.begin() != "..";
}

// One label per line, as std::getline splits them (a last line without a
// newline counts; a final newline adds no empty label).
Result<std::vector<std::string>> ReadLabelFile(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return Unavailable("no such file: " + path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable("cannot open " + path.string() + ": " + std::strerror(errno));
  std::vector<std::string> labels;
  for (std::string line; std::getline(in, line);) labels.push_back(std::move(line));
  if (in.bad()) return Unavailable("cannot read " + path.string());
  return labels;
}

// a before b: the greater value, then the lower index; NaN after every number.
template <typename T>
bool RanksBefore(const std::vector<T>& values, size_t a, size_t b) {
  const T va = values[a];
  const T vb = values[b];
  if (va > vb) return true;
  if (vb > va) return false;
  if constexpr (std::is_floating_point_v<T>) {
    const bool a_nan = std::isnan(va);
    const bool b_nan = std::isnan(vb);
    if (a_nan != b_nan) return b_nan;
  }
  return a < b;
}

void AppendBytesElement(const std::string& s, std::vector<std::byte>* out) {
  const auto length = static_cast<uint32_t>(s.size());
  const std::byte prefix[4] = {std::byte(length & 0xff), std::byte((length >> 8) & 0xff),
                               std::byte((length >> 16) & 0xff), std::byte((length >> 24) & 0xff)};
  out->insert(out->end(), prefix, prefix + 4);
  const auto* chars = reinterpret_cast<const std::byte*>(s.data());
  out->insert(out->end(), chars, chars + s.size());
}

// The top `k` of one row of `row_elements` values at `row`, appended to
// `out` as BYTES elements.
template <typename T>
void ClassifyRow(const std::byte* row, size_t row_elements, size_t k, const std::vector<std::string>* labels,
                 std::vector<T>* values, std::vector<size_t>* order, std::vector<std::byte>* out) {
  values->resize(row_elements);
  // A copy: the row may not be aligned for T, and the ranking reads each value many times.
  if (row_elements > 0) std::memcpy(values->data(), row, row_elements * sizeof(T));
  order->resize(row_elements);
  std::iota(order->begin(), order->end(), size_t{0});
  std::partial_sort(order->begin(), order->begin() + static_cast<std::ptrdiff_t>(k), order->end(),
                    [values](size_t a, size_t b) { return RanksBefore(*values, a, b); });
  std::string entry;
  for (size_t i = 0; i < k; ++i) {
    const size_t index = (*order)[i];
    // std::to_string, as Triton prints it: "%f" for floating point, the
    // integer (promoted from 8 and 16 bits) otherwise.
    entry = std::to_string((*values)[index]);
    entry += ':';
    entry += std::to_string(index);
    if (labels != nullptr && index < labels->size() && !(*labels)[index].empty()) {
      entry += ':';
      entry += (*labels)[index];
    }
    AppendBytesElement(entry, out);
  }
}

template <typename T>
std::vector<std::byte> ClassifyRows(const Tensor& tensor, size_t rows, size_t row_elements, size_t k,
                                    const std::vector<std::string>* labels) {
  std::vector<std::byte> out;
  std::vector<T> values;
  std::vector<size_t> order;
  const size_t row_bytes = row_elements * sizeof(T);
  for (size_t r = 0; r < rows; ++r) {
    ClassifyRow<T>(tensor.data.data() + r * row_bytes, row_elements, k, labels, &values, &order, &out);
  }
  return out;
}

std::vector<std::byte> ClassifyTyped(const Tensor& tensor, size_t rows, size_t row_elements, size_t k,
                                     const std::vector<std::string>* labels) {
  switch (tensor.dtype) {
    case DataType::kUint8: return ClassifyRows<uint8_t>(tensor, rows, row_elements, k, labels);
    case DataType::kUint16: return ClassifyRows<uint16_t>(tensor, rows, row_elements, k, labels);
    case DataType::kUint32: return ClassifyRows<uint32_t>(tensor, rows, row_elements, k, labels);
    case DataType::kUint64: return ClassifyRows<uint64_t>(tensor, rows, row_elements, k, labels);
    case DataType::kInt8: return ClassifyRows<int8_t>(tensor, rows, row_elements, k, labels);
    case DataType::kInt16: return ClassifyRows<int16_t>(tensor, rows, row_elements, k, labels);
    case DataType::kInt32: return ClassifyRows<int32_t>(tensor, rows, row_elements, k, labels);
    case DataType::kInt64: return ClassifyRows<int64_t>(tensor, rows, row_elements, k, labels);
    case DataType::kFp32: return ClassifyRows<float>(tensor, rows, row_elements, k, labels);
    case DataType::kFp64: return ClassifyRows<double>(tensor, rows, row_elements, k, labels);
    default: return {};  // IsClassifiable was checked first
  }
}

}  // namespace

bool IsClassifiable(DataType type) {
  switch (type) {
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kFp32:
    case DataType::kFp64: return true;
    default: return false;
  }
}

Status CheckClassifiable(const std::string& what, DataType type) {
  if (IsClassifiable(type)) return Status::Ok();
  return InvalidArgument(what + " cannot be classified: class result not available for datatype " +
                         std::string(DataTypeName(type)) + " (an integer, FP32 or FP64 output can be)");
}

Result<OutputLabels> OutputLabels::Read(const inference::ModelConfig& config, const fs::path& model_dir) {
  OutputLabels labels;
  for (const auto& out : config.output()) {
    if (out.label_filename().empty()) continue;
    const fs::path path = model_dir / out.label_filename();
    const std::string what = "label_filename " + Quote(out.label_filename()) + " of output " + Quote(out.name());
    if (!IsInside(path, model_dir)) {
      return InvalidArgument(what + " is outside the model directory " + model_dir.string());
    }
    auto read = ReadLabelFile(path);
    if (!read.ok()) return Unavailable(what + ": " + read.status().message());
    labels.by_output_[out.name()] = std::move(read).value();
  }
  return labels;
}

const std::vector<std::string>* OutputLabels::Find(const std::string& output) const {
  auto it = by_output_.find(output);
  return it == by_output_.end() ? nullptr : &it->second;
}

Status Classify(uint64_t count, bool batched, const std::vector<std::string>* labels, Tensor* tensor) {
  ORTSERVE_RETURN_IF_ERROR(CheckClassifiable("output " + Quote(tensor->name), tensor->dtype));
  const std::string what = "classification of output " + Quote(tensor->name);
  const bool has_batch = batched && !tensor->shape.empty();
  const Shape row_shape(tensor->shape.begin() + (has_batch ? 1 : 0), tensor->shape.end());
  const std::optional<uint64_t> row_elements = ElementCount(row_shape);
  const std::optional<uint64_t> rows = has_batch ? ElementCount({tensor->shape[0]}) : std::optional<uint64_t>(1);
  if (!row_elements || !rows) return Internal(what + ": bad shape " + ShapeToString(tensor->shape));
  if (*row_elements > kMaxClassificationElements) {
    return InvalidArgument(what + ": classification output tensor too large (" + std::to_string(*row_elements) +
                           " elements per batch row, at most " + std::to_string(kMaxClassificationElements) + ")");
  }
  const std::optional<uint64_t> bytes = FixedByteSize(tensor->dtype, tensor->shape);
  if (!bytes || *bytes != tensor->data.size()) {
    return Internal(what + ": " + std::to_string(tensor->data.size()) + " bytes do not match shape " +
                    ShapeToString(tensor->shape));
  }
  const size_t k = static_cast<size_t>(std::min(count, *row_elements));
  std::vector<std::byte> classes = ClassifyTyped(*tensor, static_cast<size_t>(*rows), *row_elements, k, labels);
  tensor->dtype = DataType::kBytes;
  tensor->shape = has_batch ? Shape{static_cast<int64_t>(*rows), static_cast<int64_t>(k)}
                            : Shape{static_cast<int64_t>(k)};
  tensor->data = TensorData::FromVector(std::move(classes));
  return Status::Ok();
}

}  // namespace ortserve
