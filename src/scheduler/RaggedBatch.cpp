#include "scheduler/RaggedBatch.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "scheduler/TensorStacker.h"

namespace ortserve {
namespace {

// The source input's shape in each request, in batch order.
Result<std::vector<Shape>> SourceShapes(const std::vector<const InferenceRequest*>& requests,
                                        const std::string& source, bool needs_batch_dim) {
  std::vector<Shape> shapes;
  shapes.reserve(requests.size());
  for (const InferenceRequest* request : requests) {
    const Tensor* t = FindInput(*request, source);
    if (!t) return InvalidArgument("request '" + request->id + "' has no input '" + source + "'");
    if (needs_batch_dim && t->shape.empty()) {
      return InvalidArgument("input '" + source + "' of request '" + request->id + "' has no batch dimension");
    }
    shapes.push_back(t->shape);
  }
  return shapes;
}

int64_t Elements(const Shape& shape) { return static_cast<int64_t>(ElementCount(shape).value_or(0)); }

// The values of one batch input and its shape.
struct BatchInputValues {
  std::vector<int64_t> values;
  Shape shape;
};

BatchInputValues MakeValues(BatchInputKind kind, const std::vector<Shape>& shapes) {
  BatchInputValues out;
  const auto requests = static_cast<int64_t>(shapes.size());
  int64_t sum = 0;
  switch (kind) {
    case BatchInputKind::kElementCount:
      for (const Shape& s : shapes) out.values.push_back(Elements(s));
      out.shape = {requests};
      break;
    case BatchInputKind::kAccumulatedElementCountWithZero:
      out.values.push_back(0);
      [[fallthrough]];
    case BatchInputKind::kAccumulatedElementCount:
      for (const Shape& s : shapes) out.values.push_back(sum += Elements(s));
      out.shape = {static_cast<int64_t>(out.values.size())};
      break;
    case BatchInputKind::kMaxElementCountAsShape: {
      int64_t most = 0;
      for (const Shape& s : shapes) most = std::max(most, Elements(s));
      out.values.assign(static_cast<size_t>(most), 0);
      out.shape = {most};
      break;
    }
    case BatchInputKind::kItemShape:
    case BatchInputKind::kItemShapeFlatten: {
      int64_t items = 0;
      const int64_t item_rank = shapes.empty() ? 0 : static_cast<int64_t>(shapes.front().size()) - 1;
      for (const Shape& s : shapes) {
        for (int64_t item = 0; item < s[0]; ++item) out.values.insert(out.values.end(), s.begin() + 1, s.end());
        items += s[0];
      }
      out.shape = kind == BatchInputKind::kItemShape ? Shape{items, item_rank} : Shape{items * item_rank};
      break;
    }
  }
  return out;
}

template <typename T>
TensorData Encode(const std::vector<int64_t>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    const T v = static_cast<T>(values[i]);
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
  return TensorData::FromVector(std::move(bytes));
}

// Request i's piece of `output`: the elements of its source input's shape,
// in that shape, after the pieces of the requests before it.
Status Scatter(const Tensor& output, const std::vector<Shape>& shapes, std::vector<std::vector<Tensor>>* pieces) {
  if (output.dtype == DataType::kBytes) {
    return Internal("output '" + output.name + "' is BYTES: it cannot be scattered");
  }
  const size_t element_size = DataTypeSize(output.dtype);
  uint64_t total = 0;
  for (const Shape& s : shapes) total += static_cast<uint64_t>(Elements(s));
  if (output.data.size() != total * element_size) {
    return Internal("output '" + output.name + "' holds " + std::to_string(output.data.size() / element_size) +
                    " elements, but the batch's source inputs hold " + std::to_string(total));
  }
  pieces->assign(shapes.size(), {});
  size_t offset = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const size_t length = static_cast<size_t>(Elements(shapes[i])) * element_size;
    Tensor piece;
    piece.name = output.name;
    piece.dtype = output.dtype;
    piece.shape = shapes[i];
    piece.data = output.data.Slice(offset, length);
    (*pieces)[i].push_back(std::move(piece));
    offset += length;
  }
  return Status::Ok();
}

}  // namespace

bool RaggedBatching::IsRagged(const std::string& input) const {
  return std::find(ragged_inputs.begin(), ragged_inputs.end(), input) != ragged_inputs.end();
}

const std::string* RaggedBatching::ScatterSource(const std::string& output) const {
  for (const BatchOutputSpec& spec : batch_outputs) {
    if (std::find(spec.targets.begin(), spec.targets.end(), output) != spec.targets.end()) return &spec.source;
  }
  return nullptr;
}

Status AppendBatchInputs(const RaggedBatching& ragged, const std::vector<const InferenceRequest*>& requests,
                         std::vector<Tensor>* inputs) {
  for (const BatchInputSpec& spec : ragged.batch_inputs) {
    const bool per_item =
        spec.kind == BatchInputKind::kItemShape || spec.kind == BatchInputKind::kItemShapeFlatten;
    auto shapes = SourceShapes(requests, spec.source, per_item);
    if (!shapes.ok()) return shapes.status();
    const BatchInputValues made = MakeValues(spec.kind, shapes.value());
    const TensorData data =
        spec.dtype == DataType::kFp32 ? Encode<float>(made.values) : Encode<int32_t>(made.values);
    for (const std::string& target : spec.targets) {
      Tensor t;
      t.name = target;
      t.dtype = spec.dtype;
      t.shape = made.shape;
      t.data = data;  // shared by the targets
      inputs->push_back(std::move(t));
    }
  }
  return Status::Ok();
}

Status SplitRaggedOutputs(const RaggedBatching& ragged, const std::vector<Tensor>& outputs,
                          const std::vector<std::string>& names, const std::vector<uint64_t>& rows,
                          const std::vector<const InferenceRequest*>& requests,
                          std::vector<std::vector<Tensor>>* parts) {
  parts->assign(requests.size(), {});
  std::vector<std::vector<Tensor>> pieces;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const std::string* source = j < names.size() ? ragged.ScatterSource(names[j]) : nullptr;
    if (source) {
      auto shapes = SourceShapes(requests, *source, /*needs_batch_dim=*/false);
      if (!shapes.ok()) return shapes.status();
      ORTSERVE_RETURN_IF_ERROR(Scatter(outputs[j], shapes.value(), &pieces));
    } else {
      ORTSERVE_RETURN_IF_ERROR(TensorStacker::Split({outputs[j]}, rows, &pieces));
    }
    for (size_t i = 0; i < requests.size(); ++i) (*parts)[i].push_back(std::move(pieces[i].front()));
  }
  return Status::Ok();
}

}  // namespace ortserve
