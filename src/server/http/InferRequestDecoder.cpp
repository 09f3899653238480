#include "server/http/InferRequestDecoder.h"

#include <simdjson.h>

#include <charconv>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/common/TensorLimits.h"
#include "server/http/RequestParameters.h"
#include "server/http/SharedMemoryJson.h"

namespace ortserve::http {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// One parser per thread: its buffers are reused across requests. A parser
// that grew for an unusually large body is dropped afterwards rather than
// kept per thread forever.
constexpr size_t kKeepParserCapacity = size_t{4} << 20;

// Null only when the parser's buffers cannot be allocated. `max_depth` levels
// of nesting are accepted (simdjson's own max_depth accepts one less).
simdjson::dom::parser* ThreadParser(size_t max_depth) {
  thread_local std::unique_ptr<simdjson::dom::parser> parser;
  const size_t simdjson_depth = max_depth + 1;
  if (!parser || parser->capacity() > kKeepParserCapacity || parser->max_depth() != simdjson_depth) {
    parser = std::make_unique<simdjson::dom::parser>();
    if (parser->allocate(simdjson::dom::MINIMAL_DOCUMENT_CAPACITY, simdjson_depth) != simdjson::SUCCESS)
      parser.reset();
  }
  return parser.get();
}

// Built with append: GCC 12's -Wrestrict misfires on `"'" + std::string(...)` at -O3.
std::string Quote(std::string_view s) {
  std::string quoted;
  s = s.substr(0, 128);
  quoted.reserve(s.size() + 2);
  quoted.append(1, '\'').append(s).append(1, '\'');
  return quoted;
}

// Counts the scalars in a (possibly nested) data array. Depth is bounded by
// the parser's max depth (≤ kMaxJsonDepthLimit), so the recursion is too.
void CountLeaves(element e, uint64_t* count) {
  array arr;
  if (e.get_array().get(arr) != simdjson::SUCCESS) { ++*count; return; }
  for (element child : arr) CountLeaves(child, count);
}

// A JSON integer read as the 64-bit type of Wide's signedness: false for a
// non-integer, and for a value only the other type holds (int64: above
// INT64_MAX; uint64: negative). The one kind check for conversion and message.
template <typename Wide>
bool ToWideInteger(element e, Wide* v) {
  const element_type excluded = std::is_signed_v<Wide> ? element_type::UINT64 : element_type::DOUBLE;
  return e.type() != excluded && e.get<Wide>().get(*v) == simdjson::SUCCESS;
}

template <typename T>
using WideOf = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;

// Converters from one JSON scalar to a fixed-size element: false when the
// scalar is not that type's (wrong kind, or out of the type's range).
// LeafWriter::LeafError says which, for the error message.
template <typename T>
bool ToInteger(element e, T* v) {
  WideOf<T> x;
  if (!ToWideInteger(e, &x) || !std::in_range<T>(x)) return false;
  *v = static_cast<T>(x);
  return true;
}

template <typename T>
bool ToFloat(element e, T* v) {
  double d;
  if (e.get_double().get(d) != simdjson::SUCCESS) return false;  // any number; not a string or bool
  *v = static_cast<T>(d);
  return true;
}

bool ToBoolByte(element e, uint8_t* v) {
  bool b;
  if (e.get_bool().get(b) != simdjson::SUCCESS) return false;
  *v = b ? 1 : 0;
  return true;
}

// Writes a (possibly nested) data array's leaves in order, in one pass: the
// count is checked as it goes (too_many) and after (index), not by a counting
// pass before; the nesting as it goes (too_deep: Triton's limit, checked once
// per array, not per leaf). Fixed-size types are walked by a loop specialised for the
// type (the datatype is dispatched once per input, not once per element, and
// an element's conversion is a bool, not a Status); the message for a bad
// element is built only when there is one.
struct LeafWriter {
  std::string_view input;
  DataType dtype;
  std::byte* out;   // fixed-size types
  std::string* bytes_out;  // BYTES
  uint64_t limit;   // the leaves the shape holds; `out` has room for exactly these
  uint64_t index = 0;
  bool too_many = false;  // the data has a leaf past `limit` (Walk stopped there)
  bool too_deep = false;  // an element lies kMaxJsonDataDepth arrays deep (Walk stopped there)

  Status Walk(element data) {
    switch (dtype) {
      case DataType::kBool: return WalkAs<uint8_t>(data, ToBoolByte);
      case DataType::kInt8: return WalkAs<int8_t>(data, ToInteger<int8_t>);
      case DataType::kInt16: return WalkAs<int16_t>(data, ToInteger<int16_t>);
      case DataType::kInt32: return WalkAs<int32_t>(data, ToInteger<int32_t>);
      case DataType::kInt64: return WalkAs<int64_t>(data, ToInteger<int64_t>);
      case DataType::kUint8: return WalkAs<uint8_t>(data, ToInteger<uint8_t>);
      case DataType::kUint16: return WalkAs<uint16_t>(data, ToInteger<uint16_t>);
      case DataType::kUint32: return WalkAs<uint32_t>(data, ToInteger<uint32_t>);
      case DataType::kUint64: return WalkAs<uint64_t>(data, ToInteger<uint64_t>);
      case DataType::kFp32: return WalkAs<float>(data, ToFloat<float>);
      case DataType::kFp64: return WalkAs<double>(data, ToFloat<double>);
      case DataType::kBytes: return WalkBytes(data);
      default:
        return InvalidArgument("input " + Quote(input) + ": " + std::string(DataTypeName(dtype)) +
                               " data must use the binary data extension");
    }
  }

 private:
  template <typename T>
  using Converter = bool (*)(element, T*);

  template <typename T>
  Status WalkAs(element data, Converter<T> convert) {
    element bad;
    if (WalkFixed<T>(data, convert, &bad, 0)) return Status::Ok();
    return too_deep ? DepthError() : LeafError(bad);
  }

  // False at the first leaf that does not convert (*bad, data[index]), or at
  // the first array whose elements lie too deep (too_deep). `depth`: how many
  // arrays hold `e`, as Triton counts them (the data itself is at depth 0).
  template <typename T>
  bool WalkFixed(element e, Converter<T> convert, element* bad, size_t depth) {
    array arr;
    if (e.get_array().get(arr) != simdjson::SUCCESS) {
      if (index == limit) {
        too_many = true;
        return true;
      }
      T v;
      if (!convert(e, &v)) {
        *bad = e;
        return false;
      }
      std::memcpy(out + index * sizeof(T), &v, sizeof(T));
      ++index;
      return true;
    }
    if (depth + 1 >= kMaxJsonDataDepth && arr.begin() != arr.end()) {
      too_deep = true;
      return false;
    }
    for (element child : arr) {
      if (!WalkFixed<T>(child, convert, bad, depth + 1)) return false;
      if (too_many) break;
    }
    return true;
  }

  Status WalkBytes(element e, size_t depth = 0) {
    if (array arr; e.get_array().get(arr) == simdjson::SUCCESS) {
      if (depth + 1 >= kMaxJsonDataDepth && arr.begin() != arr.end()) {
        too_deep = true;
        return DepthError();
      }
      for (element child : arr) {
        ORTSERVE_RETURN_IF_ERROR(WalkBytes(child, depth + 1));
        if (too_many) break;
      }
      return Status::Ok();
    }
    if (index == limit) {
      too_many = true;
      return Status::Ok();
    }
    std::string_view s;
    if (e.get_string().get(s) != simdjson::SUCCESS) return Bad(e, "a string");
    if (s.size() > std::numeric_limits<uint32_t>::max())
      return InvalidArgument("input " + Quote(input) + ": BYTES element too long");
    const auto len = static_cast<uint32_t>(s.size());
    char prefix[4];
    std::memcpy(prefix, &len, 4);  // little-endian host
    bytes_out->append(prefix, 4);
    bytes_out->append(s);
    ++index;
    return Status::Ok();
  }

  Status DepthError() const {
    return InvalidArgument("JSON nesting depth exceeds maximum allowed limit (" + std::to_string(kMaxJsonDataDepth) +
                           "): input " + Quote(input) + " nests its 'data' arrays deeper");
  }

  Status Bad(element e, const char* expected) const {
    return InvalidArgument("input " + Quote(input) + ": data[" + std::to_string(index) + "] is " +
                           DescribeJsonValue(e.type()) + ", expected " + expected + " for " +
                           std::string(DataTypeName(dtype)));
  }

  Status OutOfRange(const std::string& value) const {
    return InvalidArgument("input " + Quote(input) + ": data[" + std::to_string(index) + "] = " + value +
                           " is out of range for " + std::string(DataTypeName(dtype)));
  }

  // Not an integer of Wide's kind, or one out of dtype's range.
  template <typename Wide>
  Status IntegerError(element e, const char* expected) const {
    Wide v;
    if (!ToWideInteger(e, &v)) return Bad(e, expected);
    return OutOfRange(std::to_string(v));
  }

  // Why data[index] = e did not convert to dtype: the wrong kind of value, or
  // an integer out of the type's range.
  Status LeafError(element e) const {
    switch (dtype) {
      case DataType::kBool: return Bad(e, "true or false");
      case DataType::kInt8:
      case DataType::kInt16:
      case DataType::kInt32:
      case DataType::kInt64: return IntegerError<int64_t>(e, "an integer");
      case DataType::kUint8:
      case DataType::kUint16:
      case DataType::kUint32:
      case DataType::kUint64: return IntegerError<uint64_t>(e, "a non-negative integer");
      default: return Bad(e, "a number");
    }
  }
};

// An input object's fields, found in one pass over its keys (at_key scans
// the object once per lookup). Of repeated keys the first wins, as with at_key.
struct InputFields {
  std::optional<element> name, datatype, shape, parameters, data;

  explicit InputFields(object in) {
    for (auto field : in) {
      std::optional<element>* slot = Slot(field.key);
      if (slot && !*slot) *slot = field.value;
    }
  }

 private:
  std::optional<element>* Slot(std::string_view key) {
    if (key == "name") return &name;
    if (key == "datatype") return &datatype;
    if (key == "shape") return &shape;
    if (key == "parameters") return &parameters;
    if (key == "data") return &data;
    return nullptr;
  }
};

Result<Shape> ParseShape(std::string_view input, element e) {
  array arr;
  if (e.get_array().get(arr) != simdjson::SUCCESS)
    return InvalidArgument("input " + Quote(input) + ": 'shape' must be an array of non-negative integers");
  Shape shape;
  shape.reserve(arr.size());
  for (element d : arr) {
    int64_t v;
    if (d.type() == element_type::DOUBLE || d.get_int64().get(v) != simdjson::SUCCESS || v < 0)
      return InvalidArgument("input " + Quote(input) + ": 'shape' must be an array of non-negative integers");
    shape.push_back(v);
  }
  return shape;
}

Status JsonError(simdjson::error_code err, size_t max_depth) {
  if (err == simdjson::DEPTH_ERROR)
    return InvalidArgument("JSON nesting depth exceeds maximum allowed limit (" + std::to_string(max_depth) +
                           "): the request JSON nests objects and arrays deeper (--http-max-json-depth)");
  if (err == simdjson::NUMBER_ERROR) {
    // The DOM parser fails the whole document, so the tensor can't be named.
    return InvalidArgument(
        "malformed request JSON: a number is out of range or malformed (shape dimensions and "
        "integer data must fit in 64 bits)");
  }
  return InvalidArgument(std::string("malformed request JSON: ") + simdjson::error_message(err));
}

// The request's 'id' and 'parameters'.
Status DecodeRequestFields(object top, DecodedInferRequest* out) {
  InferenceRequest& req = *out->request;
  if (element id; top.at_key("id").get(id) == simdjson::SUCCESS) {
    std::string_view s;
    if (id.get_string().get(s) != simdjson::SUCCESS) return InvalidArgument("'id' must be a string");
    req.id = s;
  }
  if (element params; top.at_key("parameters").get(params) == simdjson::SUCCESS) {
    object obj;
    if (params.get_object().get(obj) != simdjson::SUCCESS)
      return InvalidArgument("'parameters' must be an object");
    ORTSERVE_RETURN_IF_ERROR(DecodeRequestParameters(obj, &req, &out->binary_data_output));
  }
  return Status::Ok();
}

// What decoding one input needs of the whole request.
struct InputContext {
  const std::shared_ptr<const std::string>& body;
  bool has_header_length;  // binary data may follow the JSON
  const InferDecodeOptions& options;
  common::SharedMemoryRefs* shared_memory;  // inputs whose data lies in a region
  // The JSON elements the inputs not yet decoded can hold at most (see
  // MostJsonLeaves); each input's JSON data takes its count off.
  uint64_t* json_leaves_left;
};

// The most scalars the 'data' arrays of a JSON document of `json_size` bytes
// can hold together: each takes a byte at least, and a comma or a bracket
// separates it from the next.
uint64_t MostJsonLeaves(size_t json_size) { return json_size / 2 + 1; }

// The binary_data_size in an input's 'parameters', if it gives one.
Status ParseBinaryDataSize(const InputFields& fields, std::string_view name, std::optional<uint64_t>* binary_size) {
  if (!fields.parameters) return Status::Ok();
  object po;
  if (fields.parameters->get_object().get(po) != simdjson::SUCCESS)
    return InvalidArgument("input " + Quote(name) + ": 'parameters' must be an object");
  if (element bs; po.at_key("binary_data_size").get(bs) == simdjson::SUCCESS) {
    uint64_t v;
    if (bs.type() == element_type::DOUBLE || bs.get_uint64().get(v) != simdjson::SUCCESS)
      return InvalidArgument("input " + Quote(name) + ": binary_data_size must be a non-negative integer");
    *binary_size = v;
  }
  return Status::Ok();
}

// The input's data as the next `binary_size` bytes of the body after the
// JSON, viewed in place; *binary_offset moves past them.
Status ViewBinaryData(std::string_view name, uint64_t binary_size, bool has_data, const InputContext& ctx,
                      size_t* binary_offset, Tensor* t) {
  const std::string& b = *ctx.body;
  if (has_data) return InvalidArgument("input " + Quote(name) + " has both 'data' and binary_data_size");
  if (!ctx.has_header_length)
    return InvalidArgument("input " + Quote(name) +
                           " has binary_data_size but the request has no Inference-Header-Content-Length");
  if (binary_size > b.size() - *binary_offset)
    return InvalidArgument("input " + Quote(name) + ": binary_data_size " + std::to_string(binary_size) +
                           " runs past the end of the body (" + std::to_string(b.size() - *binary_offset) +
                           " bytes of binary data left)");
  // Whether the bytes fit the shape (size, BYTES length prefixes) is the
  // request validator's check, the same for gRPC's raw_input_contents.
  const auto* p = reinterpret_cast<const std::byte*>(b.data()) + *binary_offset;
  const size_t n = static_cast<size_t>(binary_size);
  t->data = TensorData(ctx.body, p, n);
  *binary_offset += n;
  return Status::Ok();
}

// Triton's words after a tensor's size, which its clients and tests match.
std::string BytesOverInputLimit(const InferDecodeOptions& options) {
  return " bytes exceeds the maximum allowed input size of " + std::to_string(options.max_tensor_bytes) +
         " bytes. Use --http-max-input-size to increase the limit.";
}

// `otherwise` unless the data's leaf count differs from the shape's `count`:
// a wrong count is reported before a bad element. Leaves are counted only
// for an error.
Status UnlessCountDiffers(element data, std::string_view name, const Shape& shape, uint64_t count,
                          Status otherwise) {
  uint64_t leaves = 0;
  CountLeaves(data, &leaves);
  if (leaves == count) return otherwise;
  return InvalidArgument("input " + Quote(name) + ": data has " + std::to_string(leaves) + " elements, shape " +
                         ShapeToString(shape) + " needs " + std::to_string(count));
}

// The input's JSON 'data', written into a buffer of its own: `count`
// elements, `fixed_bytes` bytes unless the type is BYTES. No buffer is made
// for a shape that claims more elements than `leaves_left`, what the rest of
// the JSON can hold: a small body with a huge shape costs its own size, not
// the shape's.
Status DecodeJsonData(element data, std::string_view name, std::string_view dtype_name, uint64_t count,
                      std::optional<uint64_t> fixed_bytes, const InferDecodeOptions& options,
                      uint64_t* leaves_left, Tensor* t) {
  if (t->dtype == DataType::kFp16 || t->dtype == DataType::kBf16)
    return InvalidArgument("input " + Quote(name) + ": " + std::string(dtype_name) +
                           " data must use the binary data extension");
  if (fixed_bytes && *fixed_bytes > options.max_tensor_bytes)
    return Status(StatusCode::kPayloadTooLarge,
                  "input " + Quote(name) + ": " + std::string(dtype_name) + " " + ShapeToString(t->shape) +
                      " of size " + std::to_string(*fixed_bytes) + BytesOverInputLimit(options));
  if (count > *leaves_left) {
    return UnlessCountDiffers(data, name, t->shape, count,
                              Internal("input " + Quote(name) + ": more JSON elements than the body can hold"));
  }
  *leaves_left -= count;
  const auto walk = [&](LeafWriter& w) -> Status {
    Status status = w.Walk(data);
    if (w.too_deep || (status.ok() && !w.too_many && w.index == count)) return status;
    return UnlessCountDiffers(data, name, t->shape, count, std::move(status));
  };
  if (fixed_bytes) {
    auto holder = std::make_shared<std::vector<std::byte>>(static_cast<size_t>(*fixed_bytes));
    LeafWriter w{name, t->dtype, holder->data(), nullptr, count};
    ORTSERVE_RETURN_IF_ERROR(walk(w));
    const std::byte* p = holder->data();
    t->data = TensorData(std::move(holder), p, static_cast<size_t>(*fixed_bytes));
    return Status::Ok();
  }
  auto holder = std::make_shared<std::string>();
  LeafWriter w{name, t->dtype, nullptr, holder.get(), count};
  ORTSERVE_RETURN_IF_ERROR(walk(w));
  if (holder->size() > options.max_tensor_bytes)
    return Status(StatusCode::kPayloadTooLarge, "input " + Quote(name) + ": BYTES data of size " +
                                                    std::to_string(holder->size()) + BytesOverInputLimit(options));
  const auto* p = reinterpret_cast<const std::byte*>(holder->data());
  const size_t n = holder->size();
  t->data = TensorData(std::move(holder), p, n);
  return Status::Ok();
}

// inputs[index] into *t: name, datatype, shape (within the element limit),
// then its data from the body's binary part or from JSON.
Status DecodeInput(element in_el, size_t index, const InputContext& ctx, size_t* binary_offset, Tensor* t) {
  object in;
  if (in_el.get_object().get(in) != simdjson::SUCCESS)
    return InvalidArgument("inputs[" + std::to_string(index) + "] must be an object");
  std::string_view name;
  const InputFields fields(in);
  if (!fields.name || fields.name->get_string().get(name) != simdjson::SUCCESS)
    return InvalidArgument("inputs[" + std::to_string(index) + "] has no 'name' string");
  t->name = name;

  std::string_view dtype_name;
  if (!fields.datatype || fields.datatype->get_string().get(dtype_name) != simdjson::SUCCESS)
    return InvalidArgument("input " + Quote(name) + " has no 'datatype' string");
  auto dtype = DataTypeFromName(dtype_name);
  if (!dtype) return InvalidArgument("input " + Quote(name) + " has unknown datatype " + Quote(dtype_name));
  t->dtype = *dtype;

  if (!fields.shape) return InvalidArgument("input " + Quote(name) + " has no 'shape'");
  auto shape = ParseShape(name, *fields.shape);
  if (!shape.ok()) return shape.status();
  t->shape = std::move(*shape);
  auto count = common::LimitedElementCount(name, t->dtype, t->shape, ctx.options.max_tensor_elements);
  if (!count.ok()) return count.status();

  std::optional<uint64_t> binary_size;
  ORTSERVE_RETURN_IF_ERROR(ParseBinaryDataSize(fields, name, &binary_size));
  const bool has_data = fields.data.has_value();
  Result<bool> in_region = DecodeInputSharedMemory(fields.parameters, name, index, has_data, binary_size.has_value(),
                                                   ctx.shared_memory);
  if (!in_region.ok() || *in_region) return in_region.status();
  if (binary_size) return ViewBinaryData(name, *binary_size, has_data, ctx, binary_offset, t);
  if (!has_data) return InvalidArgument("input " + Quote(name) + " has neither 'data' nor binary_data_size");
  // Cannot overflow now; unset for BYTES.
  const std::optional<uint64_t> fixed_bytes = FixedByteSize(t->dtype, t->shape);
  return DecodeJsonData(*fields.data, name, dtype_name, *count, fixed_bytes, ctx.options, ctx.json_leaves_left, t);
}

// The request's 'outputs', if it lists them, with each one's binary_data
// resolved against the request-level default.
Status DecodeRequestedOutputs(object top, DecodedInferRequest* out) {
  element outs_el;
  if (top.at_key("outputs").get(outs_el) != simdjson::SUCCESS) return Status::Ok();
  InferenceRequest& req = *out->request;
  array outs;
  if (outs_el.get_array().get(outs) != simdjson::SUCCESS) return InvalidArgument("'outputs' must be an array");
  out->outputs_listed = true;
  req.requested_outputs.reserve(outs.size());
  size_t i = 0;
  for (element o_el : outs) {
    object o;
    std::string_view name;
    if (o_el.get_object().get(o) != simdjson::SUCCESS || o.at_key("name").get_string().get(name) != simdjson::SUCCESS)
      return InvalidArgument("outputs[" + std::to_string(i) + "] must be an object with a 'name' string");
    RequestedOutput ro{std::string(name), out->binary_data_output};
    if (element p; o.at_key("parameters").get(p) == simdjson::SUCCESS) {
      object po;
      if (p.get_object().get(po) != simdjson::SUCCESS)
        return InvalidArgument("output " + Quote(name) + ": 'parameters' must be an object");
      if (element bd; po.at_key("binary_data").get(bd) == simdjson::SUCCESS) {
        if (bd.get_bool().get(ro.binary_data) != simdjson::SUCCESS)
          return InvalidArgument("output " + Quote(name) + ": binary_data must be a boolean");
      }
      ORTSERVE_RETURN_IF_ERROR(DecodeOutputSharedMemory(po, name, i, &out->shared_memory));
      if (element c; po.at_key("classification").get(c) == simdjson::SUCCESS)
        ORTSERVE_RETURN_IF_ERROR(DecodeClassificationParameter(c, name, &ro.classification));
    }
    req.requested_outputs.push_back(std::move(ro));
    ++i;
  }
  return Status::Ok();
}

}  // namespace

Result<size_t> ParseInferenceHeaderLength(std::string_view value, size_t body_size) {
  size_t n = 0;
  const char* end = value.data() + value.size();
  auto r = std::from_chars(value.data(), end, n);
  if (value.empty() || r.ec != std::errc() || r.ptr != end)
    return InvalidArgument("Inference-Header-Content-Length must be a non-negative integer, got '" +
                           std::string(value.substr(0, 32)) + "'");
  if (n > body_size)
    return InvalidArgument("Inference-Header-Content-Length " + std::to_string(n) +
                           " is larger than the request body (" + std::to_string(body_size) + " bytes)");
  return n;
}

Result<DecodedInferRequest> DecodeInferRequest(std::shared_ptr<const std::string> body,
                                               std::optional<std::string_view> header_length,
                                               const InferDecodeOptions& options) {
  const std::string& b = *body;
  size_t json_size = b.size();
  if (header_length) {
    auto n = ParseInferenceHeaderLength(*header_length, b.size());
    if (!n.ok()) return n.status();
    json_size = *n;
  }
  if (json_size == 0) return InvalidArgument("request body has no JSON inference header");

  if (options.max_json_depth < 2 || options.max_json_depth > kMaxJsonDepthLimit)
    return Internal("max_json_depth " + std::to_string(options.max_json_depth) + " is outside [2, " +
                    std::to_string(kMaxJsonDepthLimit) + "]");
  simdjson::dom::parser* parser = ThreadParser(options.max_json_depth);
  if (!parser) return Internal("cannot allocate the JSON parser");
  element root;
  if (auto err = parser->parse(b.data(), json_size, true).get(root)) return JsonError(err, options.max_json_depth);
  object top;
  if (root.get_object().get(top) != simdjson::SUCCESS)
    return InvalidArgument("request JSON must be an object");

  DecodedInferRequest out;
  out.request = std::make_unique<InferenceRequest>();
  InferenceRequest& req = *out.request;
  ORTSERVE_RETURN_IF_ERROR(DecodeRequestFields(top, &out));

  array inputs;
  if (element e; top.at_key("inputs").get(e) != simdjson::SUCCESS || e.get_array().get(inputs) != simdjson::SUCCESS)
    return InvalidArgument("request JSON must have an 'inputs' array");
  uint64_t json_leaves_left = MostJsonLeaves(json_size);
  const InputContext ctx{body, header_length.has_value(), options, &out.shared_memory, &json_leaves_left};
  size_t binary_offset = json_size;  // next unread byte of binary data
  req.inputs.reserve(inputs.size());
  size_t input_index = 0;
  for (element in_el : inputs) {
    ORTSERVE_RETURN_IF_ERROR(DecodeInput(in_el, input_index++, ctx, &binary_offset, &req.inputs.emplace_back()));
  }
  if (binary_offset != b.size())
    return InvalidArgument(std::to_string(b.size() - binary_offset) +
                           " bytes of binary data follow the inputs but no input claims them (check binary_data_size)");
  ORTSERVE_RETURN_IF_ERROR(DecodeRequestedOutputs(top, &out));
  return out;
}

}  // namespace ortserve::http
