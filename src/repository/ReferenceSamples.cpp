#include "repository/ReferenceSamples.h"

#include <cstring>
#include <map>

#include "config/ConfigTypes.h"
#include "config/ModelFiles.h"

namespace ortserve {
namespace {

// The value of `key` in the header dict ("{'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }"): the text up to the next ',' outside
// parentheses; empty when absent.
std::string HeaderValue(const std::string& header, const std::string& key) {
  const size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return {};
  size_t i = header.find(':', at);
  if (i == std::string::npos) return {};
  ++i;
  int depth = 0;
  std::string value;
  for (; i < header.size(); ++i) {
    const char ch = header[i];
    if (ch == '(') ++depth;
    if (ch == ')') --depth;
    if ((ch == ',' && depth == 0) || ch == '}') break;
    if (ch != ' ' && ch != '\'') value += ch;
  }
  return value;
}

DataType NpyType(const std::string& descr) {
  static const std::map<std::string, DataType> kTypes = {
      {"|b1", DataType::kBool},  {"|i1", DataType::kInt8},   {"<i2", DataType::kInt16},
      {"<i4", DataType::kInt32}, {"<i8", DataType::kInt64},  {"|u1", DataType::kUint8},
      {"<u2", DataType::kUint16}, {"<u4", DataType::kUint32}, {"<u8", DataType::kUint64},
      {"<f2", DataType::kFp16},  {"<f4", DataType::kFp32},   {"<f8", DataType::kFp64}};
  auto it = kTypes.find(descr);
  return it == kTypes.end() ? DataType::kInvalid : it->second;
}

Result<Shape> NpyShape(const std::string& text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return InvalidArgument("bad shape " + text);
  Shape shape;
  std::string item;
  for (size_t i = 1; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == ',' || ch == ')') {
      if (!item.empty()) {
        if (item.size() > 12) return InvalidArgument("bad shape " + text);
        shape.push_back(std::stoll(item));
      }
      item.clear();
    } else if (ch >= '0' && ch <= '9') {
      item += ch;
    } else {
      return InvalidArgument("bad shape " + text);
    }
  }
  return shape;
}

}  // namespace

Result<Tensor> ParseNpy(const std::string& name, const std::string& bytes) {
  static const std::string kMagic = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, kMagic.size(), kMagic) != 0) return InvalidArgument("not an .npy file");
  const unsigned major = static_cast<unsigned char>(bytes[6]);
  const size_t length_bytes = major == 1 ? 2 : 4;
  size_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i)
    header_length |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  const size_t data_at = 8 + length_bytes + header_length;
  if (major < 1 || major > 3 || data_at > bytes.size()) return InvalidArgument("truncated .npy header");
  const std::string header = bytes.substr(8 + length_bytes, header_length);
  Tensor t;
  t.name = name;
  t.dtype = NpyType(HeaderValue(header, "descr"));
  if (t.dtype == DataType::kInvalid) {
    return InvalidArgument("unsupported .npy type '" + HeaderValue(header, "descr") + "'");
  }
  if (HeaderValue(header, "fortran_order") != "False") return InvalidArgument("Fortran-order .npy is not supported");
  auto shape = NpyShape(HeaderValue(header, "shape"));
  if (!shape.ok()) return shape.status();
  t.shape = std::move(shape).value();
  const std::optional<uint64_t> elements = ElementCount(t.shape);
  const std::optional<uint64_t> needed = elements ? CheckedMultiply(*elements, DataTypeSize(t.dtype)) : std::nullopt;
  const size_t size = bytes.size() - data_at;
  if (!needed || *needed != size) {
    return InvalidArgument("shape " + ShapeToString(t.shape) + " does not match its " + std::to_string(size) +
                           " data bytes");
  }
  std::vector<std::byte> data(size);
  if (size > 0) std::memcpy(data.data(), bytes.data() + data_at, size);
  t.data = TensorData::FromVector(std::move(data));
  return t;
}

Result<std::vector<Tensor>> ReadReferenceSamples(const inference::ModelConfig& config,
                                                 const std::filesystem::path& folder) {
  std::vector<Tensor> inputs;
  for (const auto& in : config.input()) {
    const std::filesystem::path path = folder / (in.name() + ".npy");
    auto bytes = ReadFile(path);
    if (!bytes.ok()) return InvalidArgument("reference_samples: cannot read " + path.string());
    auto tensor = ParseNpy(in.name(), bytes.value());
    if (!tensor.ok()) return InvalidArgument("reference_samples: " + path.string() + ": " + tensor.status().message());
    if (tensor->dtype != FromConfigDataType(in.data_type())) {
      return InvalidArgument("reference_samples: " + path.string() + " holds " +
                             std::string(DataTypeName(tensor->dtype)) + ", input '" + in.name() + "' is " +
                             std::string(DataTypeName(FromConfigDataType(in.data_type()))));
    }
    inputs.push_back(std::move(tensor).value());
  }
  return inputs;
}

}  // namespace ortserve
