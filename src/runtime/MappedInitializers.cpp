#include "runtime/MappedInitializers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace ortserve {
namespace {

// Protocol-buffer wire format, just enough to walk ModelProto.graph
// (field 7) -> GraphProto.initializer (field 5) -> TensorProto.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  std::optional<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos_ < data_.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return std::nullopt;
  }

  // The next field: number, wire type, and for length-delimited fields the bytes.
  struct Field {
    uint32_t number = 0;
    uint32_t wire_type = 0;
    uint64_t varint = 0;
    std::string_view bytes;
  };
  std::optional<Field> Next() {
    auto tag = Varint();
    if (!tag) return std::nullopt;
    Field f;
    f.number = static_cast<uint32_t>(*tag >> 3);
    f.wire_type = static_cast<uint32_t>(*tag & 7);
    switch (f.wire_type) {
      case 0: {
        auto v = Varint();
        if (!v) return std::nullopt;
        f.varint = *v;
        return f;
      }
      case 1: return Skip(8) ? std::optional<Field>(f) : std::nullopt;
      case 5: return Skip(4) ? std::optional<Field>(f) : std::nullopt;
      case 2: {
        auto size = Varint();
        if (!size || *size > data_.size() - pos_) return std::nullopt;
        f.bytes = data_.substr(pos_, *size);
        pos_ += *size;
        return f;
      }
      default: return std::nullopt;
    }
  }

 private:
  bool Skip(size_t n) {
    if (n > data_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::string_view data_;
  size_t pos_ = 0;
};

struct InlineTensor {
  std::string name;
  int32_t data_type = 0;
  std::vector<int64_t> dims;
  std::string_view raw;
  bool external = false;
};

std::optional<InlineTensor> ReadTensor(std::string_view bytes) {
  InlineTensor t;
  WireReader r(bytes);
  while (!r.done()) {
    auto f = r.Next();
    if (!f) return std::nullopt;
    if (f->number == 1 && f->wire_type == 0) t.dims.push_back(static_cast<int64_t>(f->varint));
    if (f->number == 1 && f->wire_type == 2) {  // packed dims
      WireReader packed(f->bytes);
      while (!packed.done()) {
        auto d = packed.Varint();
        if (!d) return std::nullopt;
        t.dims.push_back(static_cast<int64_t>(*d));
      }
    }
    if (f->number == 2 && f->wire_type == 0) t.data_type = static_cast<int32_t>(f->varint);
    if (f->number == 8 && f->wire_type == 2) t.name = std::string(f->bytes);
    if (f->number == 9 && f->wire_type == 2) t.raw = f->bytes;
    if (f->number == 14 || (f->number == 13 && f->varint == 1)) t.external = true;
  }
  return t;
}

// ONNX TensorProto data types with a fixed element size that ORT's CPU
// kernels take as initializers.
std::optional<ONNXTensorElementDataType> ElementType(int32_t onnx_type, size_t* element_size) {
  switch (onnx_type) {
    case 1: *element_size = 4; return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    case 2: *element_size = 1; return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
    case 3: *element_size = 1; return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
    case 6: *element_size = 4; return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
    case 7: *element_size = 8; return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
    case 10: *element_size = 2; return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case 11: *element_size = 8; return ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
    case 16: *element_size = 2; return ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
    default: return std::nullopt;
  }
}

// The graph's initializers (ModelProto field 7, GraphProto field 5).
std::optional<std::vector<InlineTensor>> ReadInitializers(std::string_view model) {
  std::vector<InlineTensor> tensors;
  WireReader r(model);
  while (!r.done()) {
    auto f = r.Next();
    if (!f) return std::nullopt;
    if (f->number != 7 || f->wire_type != 2) continue;
    WireReader graph(f->bytes);
    while (!graph.done()) {
      auto g = graph.Next();
      if (!g) return std::nullopt;
      if (g->number != 5 || g->wire_type != 2) continue;
      auto tensor = ReadTensor(g->bytes);
      if (!tensor) return std::nullopt;
      tensors.push_back(std::move(*tensor));
    }
  }
  return tensors;
}

}  // namespace

Result<std::unique_ptr<MappedInitializers>> MappedInitializers::Map(const std::string& model_path, size_t min_bytes) {
  const int fd = open(model_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(StatusCode::kInternal, "cannot open " + model_path);
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return Status(StatusCode::kInternal, "cannot read the size of " + model_path);
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Status(StatusCode::kInternal, "cannot map " + model_path);
  std::unique_ptr<MappedInitializers> mapped(new MappedInitializers(base, size));
  auto tensors = ReadInitializers(std::string_view(static_cast<const char*>(base), size));
  if (!tensors) return Status(StatusCode::kInternal, model_path + " is not a readable ONNX model");
  const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
  for (const InlineTensor& t : *tensors) {
    size_t element_size = 0;
    const auto type = ElementType(t.data_type, &element_size);
    if (!type || t.external || t.name.empty() || t.raw.size() < min_bytes) continue;
    // Vectors (biases, normalization scales) are what kernels read raw at
    // every run. Where the page cache holds the file in large folios, each
    // such read of a few KiB maps the whole folio (2 MiB) around it into
    // the resident set; left to each session, a vector costs its own size.
    if (t.dims.size() < 2) continue;
    size_t elements = 1;
    for (int64_t d : t.dims) elements *= d < 0 ? 0 : static_cast<size_t>(d);
    if (elements * element_size != t.raw.size()) continue;  // ORT would reject it; leave it to ORT
    // ORT reads shared initializers and never writes them; the mapping is read-only.
    void* data = const_cast<char*>(t.raw.data());
    mapped->values_.push_back(
        Ort::Value::CreateTensor(cpu, data, t.raw.size(), t.dims.data(), t.dims.size(), *type));
    mapped->names_.push_back(t.name);
    mapped->bytes_ += t.raw.size();
  }
  return mapped;
}

MappedInitializers::~MappedInitializers() {
  values_.clear();
  munmap(base_, size_);
}

void MappedInitializers::AddTo(Ort::SessionOptions& options) const {
  for (size_t i = 0; i < names_.size(); ++i) options.AddInitializer(names_[i].c_str(), values_[i]);
}

void MappedInitializers::ReleaseResidentPages() const { madvise(base_, size_, MADV_DONTNEED); }

}  // namespace ortserve
