// Fuzz target: gRPC infer request decoding. The input is parsed as a serialized
// inference.ModelInferRequest (as gRPC would hand it over), decoded by
// grpcfe::DecodeInferRequest, then checked by the request validator and input
// reshape the server applies next. Seeds are protoc --encode output of the
// tests/fuzz/grpc_seeds/*.txtpb files (see make_grpc_seeds.sh).
#include <cstdint>
#include <memory>

#include "FuzzRepository.h"
#include "grpc_service.pb.h"
#include "server/grpc/GrpcInferCodec.h"
#include "serving/RequestValidator.h"

using namespace ortserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = fuzz::QuietLogs();
  (void)quiet;
  auto message = std::make_shared<inference::ModelInferRequest>();
  if (!message->ParseFromArray(data, static_cast<int>(size))) return 0;

  InferenceRequest request;
  const Status status = grpcfe::DecodeInferRequest(message, &request);
  // The status mapping must be total.
  (void)grpcfe::ToGrpcStatus(status);
  if (!status.ok()) {
    FUZZ_CHECK(!status.message().empty());
    return 0;
  }
  FUZZ_CHECK(request.inputs.size() == static_cast<size_t>(message->inputs_size()));
  FUZZ_CHECK(request.model_name == message->model_name());
  fuzz::CheckSequenceParameters(request.sequence);
  const bool raw = message->raw_input_contents_size() > 0;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const Tensor& t = request.inputs[i];
    fuzz::TouchTensor(t);
    if (raw) {
      FUZZ_CHECK(t.data.size() == message->raw_input_contents(static_cast<int>(i)).size());
    } else {
      // Typed contents: the decoder checked the element count.
      fuzz::CheckSizeMatchesShape(t);
    }
  }

  fuzz::CheckValidationAndReshape(&request);
  return 0;
}
