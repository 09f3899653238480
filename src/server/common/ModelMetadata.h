#pragma once
// What the server and model metadata endpoints answer, built once from the
// repository in wire-neutral form. The HTTP front end renders it as JSON and
// the gRPC front end as protobuf; neither decides content, so the two
// protocols cannot disagree (tests/integration/test_protocol_parity.py).
#include <string>
#include <string_view>
#include <vector>

#include "core/Status.h"
#include "core/Tensor.h"
#include "repository/ModelRepository.h"

namespace ortserve::common {

inline constexpr std::string_view kServerName = "ortserve";

struct ServerMetadata {
  std::string name;
  std::string version;
  // The KServe/Triton protocol extensions ortserve implements, in Triton's
  // order. Unimplemented ones (shared memory, trace, logging) are left out
  // so that clients do not try them.
  std::vector<std::string> extensions;
};

ServerMetadata DescribeServer(std::string_view version);

struct TensorMetadata {
  std::string name;
  std::string_view datatype;  // KServe name: "FP32", "BYTES"
  Shape shape;                // with -1 prepended when the model batches
};

struct ModelMetadata {
  std::string name;
  // As Triton: the asked-for version alone when the request names one,
  // otherwise every ready version of the model.
  std::vector<std::string> versions;
  // The config's platform. The repository always fills it (CheckPlatform);
  // a config that only names the "onnxruntime" backend reports
  // "onnxruntime_onnx", as Triton's auto-complete does.
  std::string platform;
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

// The model's metadata, or GetModel's error (unknown model or version, not
// ready).
Result<ModelMetadata> DescribeModel(const ModelRepository& repository, const std::string& name,
                                    const std::string& version);

}  // namespace ortserve::common
