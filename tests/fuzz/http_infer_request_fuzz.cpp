// Fuzz target: HTTP infer request decoder (server/http/InferRequestDecoder),
// then the request validator and input reshape the server applies next.
//
// Input layout: "<Inference-Header-Content-Length value>\n<body>".
//   - An empty first line ("\n{...}") means the header is absent.
//   - No '\n' at all: the whole input is the body, header absent.
// So "42\n{...json of 42 bytes...}<binary tensors>" exercises the binary
// tensor extension, and any text before the newline exercises the header
// value parser ("-1", "0x10", "99999999999999999999", ...).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "FuzzRepository.h"
#include "server/http/InferRequestDecoder.h"
#include "serving/RequestValidator.h"

using namespace ortserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = fuzz::QuietLogs();
  (void)quiet;
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  std::optional<std::string_view> header;
  std::string_view body = input;
  if (const size_t nl = input.find('\n'); nl != std::string_view::npos) {
    if (nl > 0) header = input.substr(0, nl);
    body = input.substr(nl + 1);
  }
  // The body in its own exact-size allocation, as the HTTP server hands it
  // over: ASan then flags any read past its end.
  auto owned = std::make_shared<const std::string>(body);

  if (header) {
    auto n = http::ParseInferenceHeaderLength(*header, owned->size());
    if (n.ok()) FUZZ_CHECK(*n <= owned->size());
  }

  http::InferDecodeOptions options;
  options.max_tensor_bytes = size_t{1} << 20;  // keep allocations small under fuzzing
  auto decoded = http::DecodeInferRequest(owned, header, options);
  if (!decoded.ok()) {
    FUZZ_CHECK(!decoded.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(decoded->request != nullptr);
  InferenceRequest& request = *decoded->request;
  fuzz::CheckSequenceParameters(request.sequence);
  size_t binary_bytes = 0;
  // Inputs in shared memory regions have no data until the front end binds
  // them (common::BindSharedMemory); the decoder only names them.
  std::vector<bool> in_region(request.inputs.size(), false);
  for (const auto& [index, ref] : decoded->shared_memory.inputs) {
    FUZZ_CHECK(index < request.inputs.size() && !in_region[index]);
    FUZZ_CHECK(request.inputs[index].data.size() == 0);
    in_region[index] = true;
  }
  for (const auto& [index, ref] : decoded->shared_memory.outputs) {
    FUZZ_CHECK(index < request.requested_outputs.size());
  }
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const Tensor& t = request.inputs[i];
    if (in_region[i]) continue;
    fuzz::TouchTensor(t);
    FUZZ_CHECK(t.data.size() == 0 || t.data.owner() != nullptr);
    // A tensor viewing the body must lie inside it. Whether binary data fits
    // its shape is the validator's promise (checked below), not the decoder's.
    const auto* begin = reinterpret_cast<const std::byte*>(owned->data());
    if (t.data.owner() == owned) {
      FUZZ_CHECK(t.data.data() >= begin && t.data.data() + t.data.size() <= begin + owned->size());
      binary_bytes += t.data.size();
    } else {
      fuzz::CheckSizeMatchesShape(t);  // JSON data: the decoder wrote it to the shape
    }
    if (t.dtype != DataType::kBytes) FUZZ_CHECK(t.data.size() <= options.max_tensor_bytes || t.data.owner() == owned);
  }
  FUZZ_CHECK(binary_bytes <= owned->size());

  fuzz::CheckValidationAndReshape(&request);  // what the server does next
  return 0;
}
