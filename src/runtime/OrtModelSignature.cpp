#include "runtime/OrtModelSignature.h"

#include <string>
#include <vector>

#include "runtime/OpLibraries.h"
#include "runtime/OrtDataType.h"
#include "runtime/OrtEnvironment.h"
#include "runtime/OrtError.h"

namespace ortserve {
namespace {

std::string_view OnnxTypeName(ONNXType type) {
  switch (type) {
    case ONNX_TYPE_TENSOR: return "tensor";
    case ONNX_TYPE_SEQUENCE: return "sequence";
    case ONNX_TYPE_MAP: return "map";
    case ONNX_TYPE_OPAQUE: return "opaque";
    case ONNX_TYPE_SPARSETENSOR: return "sparse tensor";
    case ONNX_TYPE_OPTIONAL: return "optional";
    default: return "unknown";
  }
}

Result<TensorSignature> ReadTensorSignature(std::string name, const Ort::TypeInfo& info,
                                            std::string_view kind, std::string_view model) {
  const std::string where =
      std::string(kind) + " '" + name + "' of model '" + std::string(model) + "'";
  if (info.GetONNXType() != ONNX_TYPE_TENSOR) {
    return Unsupported(where + " is a " + std::string(OnnxTypeName(info.GetONNXType())) +
                       "; only tensors are supported");
  }
  auto tensor_info = info.GetTensorTypeAndShapeInfo();
  const ONNXTensorElementDataType element_type = tensor_info.GetElementType();
  const auto dtype = DataTypeFromOrt(element_type);
  if (!dtype) {
    return Unsupported(where + " has element type " + std::string(OrtElementTypeName(element_type)) +
                       ", which has no KServe data type");
  }
  TensorSignature sig{std::move(name), *dtype, tensor_info.GetShape()};
  // ORT reports symbolic and unknown dims as -1 already; normalise anything
  // negative so callers need only test for -1.
  for (int64_t& dim : sig.shape)
    if (dim < 0) dim = -1;
  return sig;
}

}  // namespace

Result<ModelSignature> ReadModelSignature(const Ort::Session& session, std::string_view model) {
  Ort::AllocatorWithDefaultOptions allocator;
  ModelSignature signature;
  for (size_t i = 0; i < session.GetInputCount(); ++i) {
    auto tensor = ReadTensorSignature(session.GetInputNameAllocated(i, allocator).get(),
                                      session.GetInputTypeInfo(i), "input", model);
    if (!tensor.ok()) return tensor.status();
    signature.inputs.push_back(std::move(tensor).value());
  }
  for (size_t i = 0; i < session.GetOutputCount(); ++i) {
    auto tensor = ReadTensorSignature(session.GetOutputNameAllocated(i, allocator).get(),
                                      session.GetOutputTypeInfo(i), "output", model);
    if (!tensor.ok()) return tensor.status();
    signature.outputs.push_back(std::move(tensor).value());
  }
  return signature;
}

Result<ModelSignature> InspectModel(const std::string& model_path, const std::vector<std::string>& op_libraries) {
  const std::string context = "inspecting model '" + model_path + "'";
  try {
    // Only the signature is wanted: no thread pools, no optimisation passes,
    // no arena, so inspecting a big model stays cheap.
    Ort::SessionOptions options;
    options.SetIntraOpNumThreads(1);
    options.SetInterOpNumThreads(1);
    options.AddConfigEntry("session.intra_op.allow_spinning", "0");
    options.AddConfigEntry("session.inter_op.allow_spinning", "0");
    options.SetGraphOptimizationLevel(ORT_DISABLE_ALL);
    options.DisableCpuMemArena();
    ORTSERVE_RETURN_IF_ERROR(RegisterOpLibraries(op_libraries, options));
    Ort::Session session(SharedOrtEnv(), model_path.c_str(), options);
    return ReadModelSignature(session, model_path);
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, context);
  } catch (const std::exception& e) {
    return StatusFromException(e, context);
  }
}

}  // namespace ortserve
