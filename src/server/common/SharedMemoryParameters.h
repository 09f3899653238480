#pragma once
// The shared_memory_* parameters of inputs and requested outputs, the same
// for both protocols: how they are read (each front end only says what type a
// parameter's value has), and how a request's references are bound to the
// registered regions before the request is admitted.
//
// Inputs are viewed in place: the tensor's TensorData points into the region
// and keeps its mapping alive until the request is done with it (no copy).
// BYTES inputs are the exception: they are copied, because the client may
// rewrite its region at any time and the length prefixes, once validated,
// are walked without further checks.
// Outputs are copied into their regions when the response is encoded, on the
// front end's thread; the response then names the region for each such
// output and carries no data for it.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/InferenceRequest.h"
#include "core/Status.h"
#include "server/common/SharedMemoryRegistry.h"

namespace ortserve::common {

inline constexpr std::string_view kShmRegionParameter = "shared_memory_region";
inline constexpr std::string_view kShmOffsetParameter = "shared_memory_offset";
inline constexpr std::string_view kShmByteSizeParameter = "shared_memory_byte_size";

// One parameter value as the wire gave it.
struct WireParameter {
  enum class Kind { kAbsent, kString, kSigned, kUnsigned, kOther } kind = Kind::kAbsent;
  std::string_view string_value;
  int64_t signed_value = 0;
  uint64_t unsigned_value = 0;
};
// The value of the tensor's parameter `key` (kAbsent when it has none).
using ParameterLookup = std::function<WireParameter(std::string_view key)>;

// Where a tensor's data lies: a registered region, an offset in it, a size.
struct SharedMemoryRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// The tensor's reference, nullopt when it names no region. `tensor` is how
// messages name it ("input 'X'", "output 'Y'"). kInvalidArgument when the
// region is not a string, byte_size is missing, offset or byte_size is not a
// non-negative integer, or offset/byte_size come without a region.
Result<std::optional<SharedMemoryRef>> ParseSharedMemoryRef(std::string_view tensor, const ParameterLookup& lookup);

// A request's references, by index into its inputs and requested outputs.
struct SharedMemoryRefs {
  std::vector<std::pair<size_t, SharedMemoryRef>> inputs;
  std::vector<std::pair<size_t, SharedMemoryRef>> outputs;
  bool empty() const { return inputs.empty() && outputs.empty(); }
};

// Where an output went, for the encoder: emitted as the output's parameters
// in place of its data.
struct SharedMemoryPlacement {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;  // the bytes written
};

// The output regions of one admitted request, held (mapped) until its
// response is encoded.
class SharedMemoryOutputs {
 public:
  struct Target {
    std::string output;  // the requested output's name
    SharedMemoryRef ref;
    SharedMemoryView view;
  };
  explicit SharedMemoryOutputs(std::vector<Target> targets) : targets_(std::move(targets)) {}

  // Copies each targeted output of `response` into its region. Returns, in
  // the order of response.outputs, the placement of each output written (and
  // nullopt for the others). kInvalidArgument naming the output when its data
  // is larger than its region's byte_size.
  Result<std::vector<std::optional<SharedMemoryPlacement>>> Write(const InferenceResponse& response) const;

 private:
  std::vector<Target> targets_;
};

// Binds `refs` to the registry: each input's data becomes a view of its
// region (request->inputs[i].data); each output's region is looked up and
// held. Every offset and size is checked against its region first
// (SharedMemoryRegistry::View). Null when `refs` names no output.
Result<std::shared_ptr<const SharedMemoryOutputs>> BindSharedMemory(const SharedMemoryRegistry& registry,
                                                                   const SharedMemoryRefs& refs,
                                                                   InferenceRequest* request);

}  // namespace ortserve::common
