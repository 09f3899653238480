// Fuzz target: config.pbtxt parsing (repository/ConfigParse ParseModelConfig)
// and everything the repository derives from a parsed config before it loads a
// model, in the order ModelRepository::Prepare runs it: ignored fields,
// version_weights, version policy, platform, session settings, instance
// groups, auto-complete against a fixed model signature, validation against
// it, scheduler options. A config that passes validation must then accept a
// request built from its own dims, and reshape must keep the element count.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "FuzzRepository.h"
#include "config/ConfigNormalize.h"
#include "config/ConfigRules.h"
#include "config/EnsembleGraph.h"
#include "config/RuntimeConfig.h"
#include "config/VersionPolicy.h"
#include "config/VersionWeights.h"
#include "serving/RequestValidator.h"

using namespace ortserve;

namespace {

// Signature of a batching model whose names match fuzz::ValidationConfig, of a
// small fixed-shape one and of one with a fully dynamic rank-4 input.
const std::vector<ModelSignature>& Signatures() {
  static const std::vector<ModelSignature> sigs = {
      ModelSignature{{{"INPUT0", DataType::kInt32, {-1, 16}},
                      {"INPUT1", DataType::kFp32, {-1, -1}},  // config: dims [-1, 2] reshape [-1]
                      {"TEXT", DataType::kBytes, {-1, -1}}},
                     {{"OUTPUT0", DataType::kInt32, {-1, 16}}, {"OUTPUT1", DataType::kFp32, {-1, -1}}}},
      ModelSignature{{{"x", DataType::kFp32, {3, 4}}}, {{"y", DataType::kFp32, {-1}}}},
      // Rank-4 dynamic input: lets a config reshape to (almost) anything.
      ModelSignature{{{"r", DataType::kFp32, {-1, -1, -1, -1}}}, {{"s", DataType::kFp32, {-1}}}},
  };
  return sigs;
}

// A tensor of shape [1]? + dims (-1 -> 1) with zeroed data of the right size;
// nullopt if it would be large.
template <typename ConfigTensor>
std::optional<Tensor> TensorFor(const ConfigTensor& c, bool batching) {
  Tensor t;
  t.name = c.name();
  t.dtype = FromConfigDataType(c.data_type());
  if (batching) t.shape.push_back(1);
  for (int64_t d : c.dims()) t.shape.push_back(d < 0 ? 1 : d);
  const auto count = ElementCount(t.shape);
  if (!count || *count > 4096) return std::nullopt;
  if (t.dtype == DataType::kBytes) {
    t.data = TensorData::FromVector(std::vector<std::byte>(*count * 4));  // empty strings
  } else {
    const auto bytes = FixedByteSize(t.dtype, t.shape);
    if (!bytes) return std::nullopt;
    t.data = TensorData::FromVector(std::vector<std::byte>(*bytes));
  }
  return t;
}

void CheckAgainst(const inference::ModelConfig& parsed, const ModelSignature& signature) {
  inference::ModelConfig config = parsed;
  if (!AutoCompleteConfig(signature, &config).ok()) return;
  NormalizeModelConfig(&config);
  if (!CheckModelConfigRules(config).ok() || !CheckModelIoRules(config).ok()) return;
  if (!ValidateConfigAgainstSignature(config, signature).ok()) return;
  (void)MakeDynamicBatcherOptions(config, "1");

  const bool batching = config.max_batch_size() > 0;
  InferenceRequest request;
  for (const auto& in : config.input()) {
    auto t = TensorFor(in, batching);
    if (!t) return;
    request.inputs.push_back(std::move(*t));
  }
  const Status valid = ValidateRequest(config, request);
  if (!valid.ok()) {
    std::fprintf(stderr, "validated config rejects its own request: %s\n", valid.message().c_str());
    FUZZ_CHECK(valid.ok());
  }
  std::vector<std::optional<uint64_t>> counts;
  for (const Tensor& t : request.inputs) counts.push_back(ElementCount(t.shape));
  if (ApplyInputReshape(config, &request).ok()) {
    for (size_t i = 0; i < request.inputs.size(); ++i) {
      const Tensor& t = request.inputs[i];
      if (ElementCount(t.shape) != counts[i]) {
        std::fprintf(stderr, "reshape of input '%s' to %s changed its element count\n", t.name.c_str(),
                     ShapeToString(t.shape).c_str());
        FUZZ_CHECK(ElementCount(t.shape) == counts[i]);
      }
    }
  }
  InferenceResponse response;
  for (const auto& out : config.output()) {
    auto t = TensorFor(out, batching);
    if (!t) return;
    response.outputs.push_back(std::move(*t));
  }
  (void)ApplyOutputReshape(config, &response);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = fuzz::QuietLogs();
  (void)quiet;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseModelConfig(text, "config.pbtxt");
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    FUZZ_CHECK(parsed.status().message().rfind("config.pbtxt", 0) == 0);
    return 0;
  }
  inference::ModelConfig config = std::move(parsed).value();
  if (config.name().empty()) config.set_name("fuzz");
  (void)IgnoredConfigFields(config);
  for (const auto& [key, value] : config.parameters()) (void)IsKnownParameter(key);
  if (auto w = config.parameters().find(kVersionWeightsParameter); w != config.parameters().end()) {
    (void)ParseVersionWeights(w->second.string_value());
  }
  const VersionSelection selection = SelectVersions(config.version_policy(), {1, 2, 3, 7});
  for (int64_t v : selection.load) FUZZ_CHECK(v == 1 || v == 2 || v == 3 || v == 7);
  if (!CheckPlatform(&config).ok()) return 0;
  if (IsEnsemble(config)) {
    // A checked graph: its plan, and the mapping checks with the ensemble's
    // own config standing in for every composing model.
    const EnsemblePlan plan = MakeEnsemblePlan(config);
    FUZZ_CHECK(plan.steps.size() == static_cast<size_t>(config.ensemble_scheduling().step_size()));
    std::vector<const inference::ModelConfig*> steps(plan.steps.size(), &config);
    (void)CheckEnsembleAgainstModels(config, steps);
    return 0;
  }
  if (!ReadSessionSettings(config).ok()) return 0;
  if (!ExpandInstanceGroups(config).ok()) return 0;
  for (const ModelSignature& signature : Signatures()) CheckAgainst(config, signature);
  return 0;
}
