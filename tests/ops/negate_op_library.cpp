// A custom-operator library for the tests, built as build/libortserve_test_ops.so:
// domain "ortserve.test", operator Negate (FP32 tensor -> its negation).
// ORT finds it the way it finds any library named in model_operations:
// dlopen, then the exported RegisterCustomOps. It needs no other library:
// the ORT API comes in through RegisterCustomOps' OrtApiBase.
#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>
#undef ORT_API_MANUAL_INIT

#include <exception>

namespace {

constexpr const char* kDomain = "ortserve.test";

struct NegateKernel {
  OrtStatusPtr ComputeV2(OrtKernelContext* raw_context) {
    try {
      Ort::KernelContext context(raw_context);
      Ort::ConstValue input = context.GetInput(0);
      const auto info = input.GetTensorTypeAndShapeInfo();
      Ort::UnownedValue output = context.GetOutput(0, info.GetShape());
      const float* in = input.GetTensorData<float>();
      float* out = output.GetTensorMutableData<float>();
      for (size_t i = 0, n = info.GetElementCount(); i < n; ++i) out[i] = -in[i];
      return nullptr;
    } catch (const std::exception& e) {
      return Ort::GetApi().CreateStatus(ORT_RUNTIME_EXCEPTION, e.what());
    }
  }
};

struct NegateOp : Ort::CustomOpBase<NegateOp, NegateKernel, /*WithStatus=*/true> {
  OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo*, void** kernel) const {
    *kernel = new NegateKernel();
    return nullptr;
  }
  const char* GetName() const { return "Negate"; }
  size_t GetInputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetInputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }
  size_t GetOutputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetOutputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }
};

}  // namespace

// The domain and its operator live as long as the library: ORT keeps the
// library loaded until the last session that registered it is released.
extern "C" __attribute__((visibility("default"))) OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {  // an ONNX Runtime older than the headers this library was built with
    return api_base->GetApi(1)->CreateStatus(ORT_FAIL, "libortserve_test_ops needs a newer ONNX Runtime");
  }
  Ort::InitApi(api);
  try {
    static NegateOp negate;
    static Ort::CustomOpDomain domain = [] {
      Ort::CustomOpDomain d(kDomain);
      d.Add(&negate);
      return d;
    }();
    Ort::UnownedSessionOptions(options).Add(domain);
    return nullptr;
  } catch (const std::exception& e) {
    return api->CreateStatus(ORT_FAIL, e.what());
  }
}
