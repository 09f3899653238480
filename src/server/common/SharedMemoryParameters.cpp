#include "server/common/SharedMemoryParameters.h"

#include <cstring>

namespace ortserve::common {
namespace {

using Kind = WireParameter::Kind;

// A non-negative integer parameter; nullopt when absent.
Result<std::optional<uint64_t>> UnsignedParameter(std::string_view tensor, std::string_view key,
                                                  const WireParameter& p) {
  switch (p.kind) {
    case Kind::kAbsent: return std::optional<uint64_t>();
    case Kind::kUnsigned: return std::optional<uint64_t>(p.unsigned_value);
    case Kind::kSigned:
      if (p.signed_value >= 0) return std::optional<uint64_t>(static_cast<uint64_t>(p.signed_value));
      return InvalidArgument(std::string(tensor) + ": '" + std::string(key) + "' must not be negative, got " +
                             std::to_string(p.signed_value));
    case Kind::kString:
    case Kind::kOther: break;
  }
  return InvalidArgument("Unable to parse '" + std::string(key) + "': " + std::string(tensor) +
                         " gives it as something other than a non-negative integer");
}

}  // namespace

Result<std::optional<SharedMemoryRef>> ParseSharedMemoryRef(std::string_view tensor, const ParameterLookup& lookup) {
  const WireParameter region = lookup(kShmRegionParameter);
  auto offset = UnsignedParameter(tensor, kShmOffsetParameter, lookup(kShmOffsetParameter));
  if (!offset.ok()) return offset.status();
  auto byte_size = UnsignedParameter(tensor, kShmByteSizeParameter, lookup(kShmByteSizeParameter));
  if (!byte_size.ok()) return byte_size.status();
  if (region.kind == Kind::kAbsent) {
    if (offset->has_value() || byte_size->has_value()) {
      return InvalidArgument(std::string(tensor) + " has shared_memory_offset or shared_memory_byte_size but no " +
                             "shared_memory_region");
    }
    return std::optional<SharedMemoryRef>();
  }
  if (region.kind != Kind::kString) {
    return InvalidArgument("Unable to parse 'shared_memory_region': " + std::string(tensor) +
                           " gives it as something other than a string");
  }
  if (!byte_size->has_value()) {
    return InvalidArgument(std::string(tensor) + " has shared_memory_region but no shared_memory_byte_size");
  }
  return std::optional<SharedMemoryRef>(
      SharedMemoryRef{std::string(region.string_value), offset->value_or(0), **byte_size});
}

Result<std::vector<std::optional<SharedMemoryPlacement>>> SharedMemoryOutputs::Write(
    const InferenceResponse& response) const {
  std::vector<std::optional<SharedMemoryPlacement>> placed(response.outputs.size());
  for (const Target& target : targets_) {
    for (size_t i = 0; i < response.outputs.size(); ++i) {
      const Tensor& t = response.outputs[i];
      if (t.name != target.output || placed[i]) continue;
      const size_t n = t.data.size();
      if (n > target.view.size) {
        return InvalidArgument("shared memory size specified with the request for output '" + t.name + "' (" +
                               std::to_string(target.view.size) + " bytes) should be at least " +
                               std::to_string(n) + " bytes to hold the results");
      }
      if (n > 0) std::memcpy(target.view.data, t.data.data(), n);
      placed[i] = SharedMemoryPlacement{target.ref.region, target.ref.offset, n};
      break;
    }
  }
  return placed;
}

Result<std::shared_ptr<const SharedMemoryOutputs>> BindSharedMemory(const SharedMemoryRegistry& registry,
                                                                   const SharedMemoryRefs& refs,
                                                                   InferenceRequest* request) {
  for (const auto& [index, ref] : refs.inputs) {
    Result<SharedMemoryView> view = registry.View(ref.region, ref.offset, ref.byte_size);
    if (!view.ok()) return view.status();
    Tensor& t = request->inputs.at(index);
    // Whether byte_size fits the shape and datatype is the request
    // validator's check, as for every other way of sending data. BYTES data
    // is copied: the client can rewrite its region at any time, and the
    // validator's proof that the length prefixes cover the data must still
    // hold when the runtime walks them.
    t.data = t.dtype == DataType::kBytes ? TensorData::Copy(view->data, view->size)
                                         : TensorData(view->owner(), view->data, view->size);
  }
  if (refs.outputs.empty()) return std::shared_ptr<const SharedMemoryOutputs>();
  std::vector<SharedMemoryOutputs::Target> targets;
  targets.reserve(refs.outputs.size());
  for (const auto& [index, ref] : refs.outputs) {
    const RequestedOutput& requested = request->requested_outputs.at(index);
    // As Triton: classification strings are made from the tensor, never
    // written into a region.
    if (requested.classification > 0) {
      return InvalidArgument("Output can't set both 'shared_memory_region' and 'classification' (output '" +
                             requested.name.substr(0, 128) + "')");
    }
    Result<SharedMemoryView> view = registry.View(ref.region, ref.offset, ref.byte_size);
    if (!view.ok()) return view.status();
    targets.push_back({requested.name, ref, std::move(view).value()});
  }
  return std::make_shared<const SharedMemoryOutputs>(std::move(targets));
}

}  // namespace ortserve::common
