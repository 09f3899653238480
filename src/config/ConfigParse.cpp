#include "config/ConfigParse.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <set>

#include "config/DriftConfig.h"
#include "config/GpuConfig.h"
#include "config/ReferenceConfig.h"
#include "config/RolloutConfig.h"
#include "config/ShadowConfig.h"
#include "config/RuntimeConfig.h"
#include "config/SequenceConfig.h"
#include "config/ShapeBucketConfig.h"

namespace ortserve {
namespace {

namespace pb = google::protobuf;

// Keeps the first syntax error with its 1-based position.
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!has_error_) {
      has_error_ = true;
      line_ = line + 1;
      column_ = column + 1;
      message_ = message;
    }
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  std::string Describe(const std::string& label) const {
    return label + ":" + std::to_string(line_) + ":" + std::to_string(column_) + ": " + message_;
  }

 private:
  bool has_error_ = false;
  int line_ = 0;
  int column_ = 0;
  std::string message_;
};

// Fields ortserve acts on; everything else that is set is reported as ignored.
// "Leaf" entries are supported as a whole; "container" entries are descended
// into so that unsupported sub-fields are named precisely.
const std::set<std::string>& SupportedLeaves() {
  static const std::set<std::string> kLeaves = {
      "name", "platform", "backend", "version_policy", "max_batch_size",
      "default_model_filename", "parameters", "model_warmup",
      // Ensembles (config/EnsembleGraph.h, EnsembleScheduler.h).
      "ensemble_scheduling",
      // The sequence batcher's (config/SequenceConfig.h); iterative_sequence fails the load there.
      "sequence_batching.max_sequence_idle_microseconds", "sequence_batching.control_input",
      "sequence_batching.iterative_sequence",
      "sequence_batching.direct.max_queue_delay_microseconds", "sequence_batching.direct.minimum_slot_utilization",
      "sequence_batching.oldest.max_candidate_sequences", "sequence_batching.oldest.preferred_batch_size",
      "sequence_batching.oldest.max_queue_delay_microseconds",
      "sequence_batching.state.input_name", "sequence_batching.state.output_name",
      "sequence_batching.state.data_type", "sequence_batching.state.dims", "sequence_batching.state.initial_state",
      "input.name", "input.data_type", "input.dims", "input.reshape", "input.optional",
      // Ragged batching (config/RaggedConfig.h).
      "input.allow_ragged_batch", "batch_input", "batch_output",
      // Informational in Triton too (layout hint for clients).
      "input.format",
      "output.name", "output.data_type", "output.dims", "output.reshape",
      // The classification extension's labels (serving/Classification.h).
      "output.label_filename",
      "instance_group.name", "instance_group.kind", "instance_group.count",
      "instance_group.gpus",
      "optimization.graph", "optimization.execution_accelerators",
      "dynamic_batching.preferred_batch_size", "dynamic_batching.max_queue_delay_microseconds",
      "dynamic_batching.priority_levels", "dynamic_batching.default_priority_level",
      "dynamic_batching.default_queue_policy", "dynamic_batching.priority_queue_policy",
      "response_cache.enable",
      // Custom-operator libraries (runtime/OpLibraries.h).
      "model_operations",
  };
  return kLeaves;
}

const std::set<std::string>& SupportedContainers() {
  static const std::set<std::string> kContainers = {
      "input", "output", "instance_group", "optimization", "dynamic_batching",
      "model_transaction_policy", "sequence_batching", "sequence_batching.direct", "sequence_batching.oldest",
      "sequence_batching.state", "response_cache"};
  return kContainers;
}

void CollectIgnored(const pb::Message& message, const std::string& prefix,
                    std::vector<std::string>* out) {
  const pb::Reflection* reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const std::string path = prefix.empty() ? field->name() : prefix + "." + field->name();
    if (SupportedLeaves().count(path)) continue;
    if (SupportedContainers().count(path) &&
        field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        const int n = reflection->FieldSize(message, field);
        for (int i = 0; i < n; ++i) {
          CollectIgnored(reflection->GetRepeatedMessage(message, field, i), path, out);
        }
      } else {
        CollectIgnored(reflection->GetMessage(message, field), path, out);
      }
      continue;
    }
    if (std::find(out->begin(), out->end(), path) == out->end()) out->push_back(path);
  }
}

}  // namespace

Result<inference::ModelConfig> ParseModelConfig(const std::string& text, const std::string& label) {
  inference::ModelConfig config;
  FirstErrorCollector errors;
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    if (errors.has_error()) return InvalidArgument(errors.Describe(label));
    return InvalidArgument(label + ": cannot be parsed");
  }
  return config;
}

std::vector<std::string> IgnoredConfigFields(const inference::ModelConfig& config) {
  std::vector<std::string> out;
  CollectIgnored(config, "", &out);
  return out;
}

bool IsKnownParameter(const std::string& key) {
  static const std::set<std::string> kKnown = {
      "intra_op_thread_count", "inter_op_thread_count", "execution_mode",
      "enable_mem_arena",      "enable_mem_pattern",    "allow_spinning",        "ort_thread_pool",
      kFallbackModelParameter, kBatchWindowParameter, kInstanceBatchesParameter, kSequenceRestartParameter,
      kInlineRunMaxUsParameter};
  return kKnown.count(key) > 0 || IsGpuParameter(key) || IsShapeBucketParameter(key) ||
         IsRolloutParameter(key) || IsReferenceParameter(key) || IsDriftParameter(key) ||
         IsShadowParameter(key) ||
         key.starts_with(kSessionConfigPrefix);
}

std::string FallbackModelName(const inference::ModelConfig& config) {
  auto it = config.parameters().find(kFallbackModelParameter);
  return it == config.parameters().end() ? std::string() : it->second.string_value();
}

}  // namespace ortserve
