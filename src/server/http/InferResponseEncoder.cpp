#include "server/http/InferResponseEncoder.h"

#include <bit>
#include <cstring>

#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

template <typename T>
T Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T, typename F>
void WriteAll(const std::byte* p, size_t n, F&& write) {
  for (size_t i = 0; i < n; ++i) write(Load<T>(p + i * sizeof(T)));
}

Status WriteData(JsonWriter& w, const Tensor& t, uint64_t count) {
  const std::byte* p = t.data.data();
  const size_t n = static_cast<size_t>(count);
  w.StartArray();
  switch (t.dtype) {
    case DataType::kBool: WriteAll<uint8_t>(p, n, [&](uint8_t v) { w.Bool(v != 0); }); break;
    case DataType::kUint8: WriteAll<uint8_t>(p, n, [&](auto v) { w.Int(v); }); break;
    case DataType::kUint16: WriteAll<uint16_t>(p, n, [&](auto v) { w.Int(v); }); break;
    case DataType::kUint32: WriteAll<uint32_t>(p, n, [&](auto v) { w.Int(v); }); break;
    case DataType::kUint64: WriteAll<uint64_t>(p, n, [&](auto v) { w.Int(v); }); break;
    case DataType::kInt8: WriteAll<int8_t>(p, n, [&](auto v) { w.Int(v); }); break;
    case DataType::kInt16: WriteAll<int16_t>(p, n, [&](auto v) { w.Int(v); }); break;
    case DataType::kInt32: WriteAll<int32_t>(p, n, [&](auto v) { w.Int(v); }); break;
    case DataType::kInt64: WriteAll<int64_t>(p, n, [&](auto v) { w.Int(v); }); break;
    case DataType::kFp16: WriteAll<uint16_t>(p, n, [&](uint16_t v) { w.Float(HalfToFloat(v)); }); break;
    case DataType::kBf16: WriteAll<uint16_t>(p, n, [&](uint16_t v) { w.Float(Bf16ToFloat(v)); }); break;
    case DataType::kFp32: WriteAll<float>(p, n, [&](float v) { w.Float(v); }); break;
    case DataType::kFp64: WriteAll<double>(p, n, [&](double v) { w.Float(v); }); break;
    case DataType::kBytes: {
      size_t pos = 0;
      const size_t size = t.data.size();
      while (pos < size) {  // bounds already proven by CountBytesElements
        const uint32_t len = Load<uint32_t>(p + pos);
        pos += 4;
        w.String(std::string_view(reinterpret_cast<const char*>(p + pos), len));
        pos += len;
      }
      break;
    }
    case DataType::kInvalid: return Internal("output '" + t.name + "' has no datatype");
  }
  w.EndArray();
  return Status::Ok();
}

}  // namespace

Result<EncodedInferResponse> EncodeInferResponse(const InferenceResponse& response, bool outputs_listed,
                                                 bool binary_data_output,
                                                 const SharedMemoryPlacements* in_shared_memory) {
  EncodedInferResponse out;
  // JSON size guess: the fixed part plus, per output, name/shape and (if
  // JSON) ~12 characters per element.
  size_t guess = 96 + response.model_name.size() + response.id.size();
  for (const auto& t : response.outputs) guess += 96 + t.name.size();
  out.json.reserve(guess);
  JsonWriter w(&out.json);
  w.StartObject();
  w.Key("model_name");
  w.String(response.model_name);
  w.Key("model_version");
  w.String(response.model_version);
  if (!response.id.empty()) {
    w.Key("id");
    w.String(response.id);
  }
  if (!response.parameters.empty()) {
    w.Key("parameters");
    w.StartObject();
    for (const auto& [key, value] : response.parameters) {
      w.Key(key);
      w.String(value);
    }
    w.EndObject();
  }
  w.Key("outputs");
  w.StartArray();
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& t = response.outputs[i];
    const auto count = ElementCount(t.shape);
    if (!count) return Internal("output '" + t.name + "' has invalid shape " + ShapeToString(t.shape));
    if (t.dtype == DataType::kBytes) {
      auto n = CountBytesElements(t.data.data(), t.data.size());
      if (!n || *n != *count)
        return Internal("output '" + t.name + "' BYTES data does not match shape " + ShapeToString(t.shape));
    } else {
      auto bytes = FixedByteSize(t.dtype, t.shape);
      if (!bytes || *bytes != t.data.size())
        return Internal("output '" + t.name + "' has " + std::to_string(t.data.size()) +
                        " bytes, shape " + ShapeToString(t.shape) + " of " + std::string(DataTypeName(t.dtype)) +
                        " needs " + (bytes ? std::to_string(*bytes) : std::string("an overflowing size")));
    }
    const bool binary =
        outputs_listed && i < response.requested.size() ? response.requested[i].binary_data : binary_data_output;

    w.StartObject();
    w.Key("name");
    w.String(t.name);
    w.Key("datatype");
    w.String(DataTypeName(t.dtype));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int(d);
    w.EndArray();
    if (in_shared_memory && i < in_shared_memory->size() && (*in_shared_memory)[i]) {
      // Neither data nor parameters, as Triton: clients read an output's
      // 'parameters' as binary data (tritonclient's C++ HTTP client, which
      // perf_analyzer uses, fails on parameters without binary_data_size).
    } else if (binary) {
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Int(t.data.size());
      w.EndObject();
      out.binary_bytes += t.data.size();
      out.binary.push_back(t.data);
    } else {
      out.json.reserve(out.json.size() + static_cast<size_t>(std::min<uint64_t>(*count, 1u << 24)) * 12 + 16);
      w.Key("data");
      ORTSERVE_RETURN_IF_ERROR(WriteData(w, t, *count));
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return out;
}

}  // namespace ortserve::http
