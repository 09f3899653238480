#include "config/EnsembleGraph.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace ortserve {
namespace {

using Steps = google::protobuf::RepeatedPtrField<inference::ModelEnsembling::Step>;
using Dims = google::protobuf::RepeatedField<int64_t>;

// One ensemble tensor: the step that produces it (none for an ensemble
// input or an unconnected tensor) and the steps that consume it.
struct TensorNode {
  std::optional<size_t> producer;
  std::vector<size_t> consumers;
};
using TensorGraph = std::map<std::string, TensorNode>;

std::vector<std::pair<std::string, std::string>> Sorted(const google::protobuf::Map<std::string, std::string>& map) {
  std::vector<std::pair<std::string, std::string>> out(map.begin(), map.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::string InEnsemble(const inference::ModelConfig& config) { return " for ensemble '" + config.name() + "'"; }

// Triton's BuildEnsembleGraph: every step's fields, no tensor produced twice,
// no model input mapped twice.
Result<TensorGraph> BuildGraph(const inference::ModelConfig& config) {
  TensorGraph graph;
  const Steps& steps = config.ensemble_scheduling().step();
  for (size_t i = 0; i < static_cast<size_t>(steps.size()); ++i) {
    const auto& step = steps[static_cast<int>(i)];
    const std::string where = " in step " + std::to_string(i) + " of ensemble '" + config.name() + "'";
    if (step.model_name().empty()) return Unavailable("must specify 'model_name'" + where);
    if (step.model_name() == config.name()) {
      // Triton's words first.
      const std::string& e = config.name();
      return Unavailable("circular dependency between ensembles: " + e + " -> ... -> " + e + " -> " + e +
                         " (ensemble '" + e + "' has a cycle: " + StepLabel(i, step.model_name()) +
                         " runs the ensemble itself)");
    }
    if (step.input_map().empty()) return Unavailable("must specify 'input_map'" + where);
    if (step.output_map().empty()) return Unavailable("must specify 'output_map'" + where);
    for (const auto& [model_output, tensor] : Sorted(step.output_map())) {
      TensorNode& node = graph[tensor];
      if (node.producer) {
        return Unavailable("ensemble tensor '" + tensor + "' can appear in an output map only once" +
                           InEnsemble(config) + " step " + std::to_string(i) + " (already produced by " +
                           StepLabel(*node.producer, steps[static_cast<int>(*node.producer)].model_name()) + ")");
      }
      node.producer = i;
    }
    // input_map is keyed by model input, so no model input can be mapped twice.
    for (const auto& [model_input, tensor] : Sorted(step.input_map())) graph[tensor].consumers.push_back(i);
  }
  return graph;
}

// A cycle among the steps, as "step 0 (model 'a') -> step 1 (model 'b') ->
// step 0 (model 'a')"; empty when there is none.
std::string FindCycle(const inference::ModelConfig& config, const TensorGraph& graph) {
  const Steps& steps = config.ensemble_scheduling().step();
  const size_t n = static_cast<size_t>(steps.size());
  std::vector<std::vector<size_t>> next(n);  // step -> the steps consuming what it produces
  for (const auto& [name, node] : graph) {
    if (node.producer) next[*node.producer].insert(next[*node.producer].end(), node.consumers.begin(), node.consumers.end());
  }
  enum class Mark { kNew, kOnPath, kDone };
  std::vector<Mark> mark(n, Mark::kNew);
  std::vector<size_t> path;
  std::function<std::optional<size_t>(size_t)> visit = [&](size_t s) -> std::optional<size_t> {
    mark[s] = Mark::kOnPath;
    path.push_back(s);
    for (size_t t : next[s]) {
      if (mark[t] == Mark::kOnPath) return t;
      if (mark[t] == Mark::kNew) {
        if (auto found = visit(t)) return found;
      }
    }
    path.pop_back();
    mark[s] = Mark::kDone;
    return std::nullopt;
  };
  for (size_t s = 0; s < n; ++s) {
    if (mark[s] != Mark::kNew) continue;
    auto start = visit(s);
    if (!start) continue;
    std::string text;
    auto first = std::find(path.begin(), path.end(), *start);
    for (auto it = first; it != path.end(); ++it) text += StepLabel(*it, steps[static_cast<int>(*it)].model_name()) + " -> ";
    return text + StepLabel(*start, steps[static_cast<int>(*start)].model_name());
  }
  return "";
}

// Which tensors the ensemble inputs reach: a step runs once all its inputs
// exist, and then its outputs exist.
std::set<std::string> ReachableTensors(const inference::ModelConfig& config, const TensorGraph& graph) {
  const Steps& steps = config.ensemble_scheduling().step();
  std::set<std::string> ready;
  std::deque<std::string> queue;
  for (const auto& input : config.input()) {
    if (ready.insert(input.name()).second) queue.push_back(input.name());
  }
  std::set<size_t> ran;
  while (!queue.empty()) {
    const TensorNode& node = graph.at(queue.front());
    queue.pop_front();
    for (size_t s : node.consumers) {
      const auto& step = steps[static_cast<int>(s)];
      const bool runnable = std::all_of(step.input_map().begin(), step.input_map().end(),
                                        [&](const auto& in) { return ready.count(in.second) > 0; });
      if (!runnable || !ran.insert(s).second) continue;
      for (const auto& [model_output, tensor] : step.output_map()) {
        if (ready.insert(tensor).second) queue.push_back(tensor);
      }
    }
  }
  return ready;
}

// Triton's "is not written" message, with the unconnected tensor the output
// depends on, found by walking back through tensors that never exist.
std::string NotWritten(const inference::ModelConfig& config, const TensorGraph& graph,
                       const std::set<std::string>& ready, const std::string& output) {
  std::string message = "output '" + output + "'" + InEnsemble(config) + " is not written";
  const Steps& steps = config.ensemble_scheduling().step();
  std::string source = output;
  std::set<std::string> seen{output};
  for (bool moved = true; moved;) {
    moved = false;
    const TensorNode& node = graph.at(source);
    if (!node.producer) break;
    for (const auto& [model_input, tensor] : Sorted(steps[static_cast<int>(*node.producer)].input_map())) {
      if (ready.count(tensor) || !seen.insert(tensor).second) continue;
      source = tensor;
      moved = true;
      break;
    }
  }
  if (source != output) message += ": at least one of its depending tensors, '" + source + "', is not connected";
  return message;
}

// The client provides the ensemble inputs: no step may produce one.
Status CheckInputsNotProduced(const inference::ModelConfig& config, const TensorGraph& graph) {
  const Steps& steps = config.ensemble_scheduling().step();
  for (const auto& input : config.input()) {
    auto it = graph.find(input.name());
    if (it == graph.end() || !it->second.producer) continue;
    const size_t producer = *it->second.producer;
    return Unavailable("ensemble input '" + input.name() + "'" + InEnsemble(config) + " is also produced by " +
                       StepLabel(producer, steps[static_cast<int>(producer)].model_name()));
  }
  return Status::Ok();
}

Status CheckDataFlow(const inference::ModelConfig& config, const TensorGraph& graph) {
  const Steps& steps = config.ensemble_scheduling().step();
  for (const auto& input : config.input()) {
    auto it = graph.find(input.name());
    if (it == graph.end()) {
      return Unavailable("ensemble input '" + input.name() + "' for ensemble " + config.name() + "' is not used");
    }
  }
  const std::set<std::string> ready = ReachableTensors(config, graph);
  std::set<std::string> outputs;
  for (const auto& output : config.output()) {
    if (!graph.count(output.name())) {
      return Unavailable("ensemble output '" + output.name() + "' for ensemble " + config.name() + "' is not used");
    }
    if (!ready.count(output.name())) return Unavailable(NotWritten(config, graph, ready, output.name()));
    outputs.insert(output.name());
  }
  for (const auto& [name, node] : graph) {
    if (outputs.count(name) || (ready.count(name) && !node.consumers.empty())) continue;
    std::string message = "ensemble tensor '" + name + "' is unused in ensemble '" + config.name() + "'";
    if (node.producer) {
      message += " (" + StepLabel(*node.producer, steps[static_cast<int>(*node.producer)].model_name()) +
                 (ready.count(name) ? " produces it and no step consumes it)" : " produces it but never runs)");
    } else {
      message += " (" + StepLabel(node.consumers.front(), steps[static_cast<int>(node.consumers.front())].model_name()) +
                 " consumes it but no step produces it)";
    }
    return Unavailable(message);
  }
  return Status::Ok();
}

// ---- checks against the composing models (Triton's ValidateEnsembleConfig)

// One ensemble tensor as a model sees it: full dims (with the batch
// dimension as -1 when the model batches).
struct TensorType {
  std::string model;
  inference::DataType type = inference::TYPE_INVALID;
  std::vector<int64_t> dims;
  std::vector<int64_t> full_dims;
};

TensorType MakeType(const std::string& model, bool batching, inference::DataType type, const Dims& dims) {
  TensorType t{model, type, {dims.begin(), dims.end()}, {}};
  if (batching) t.full_dims.push_back(-1);
  t.full_dims.insert(t.full_dims.end(), dims.begin(), dims.end());
  return t;
}

bool DimsMatch(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && a[i] != -1 && b[i] != -1) return false;
  }
  return true;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "," : "") + std::to_string(dims[i]);
  return text + "]";
}

Status CheckConsistent(const TensorType& lhs, const TensorType& rhs, const std::string& prefix) {
  if (lhs.type != rhs.type) {
    return Unavailable(prefix + "inconsistent data type: " + inference::DataType_Name(lhs.type) +
                       " is inferred from model " + lhs.model + " while " + inference::DataType_Name(rhs.type) +
                       " is inferred from model " + rhs.model);
  }
  // Matching dims, or matching full dims: a non-batching model's [-1, d...]
  // agrees with a batching model's [d...].
  if (!DimsMatch(lhs.dims, rhs.dims) && !DimsMatch(lhs.full_dims, rhs.full_dims)) {
    return Unavailable(prefix + "inconsistent shape: " + DimsText(lhs.full_dims) + " is inferred from model " +
                       lhs.model + " while " + DimsText(rhs.full_dims) + " is inferred from model " + rhs.model);
  }
  return Status::Ok();
}

// Records `type` for `tensor`, or checks it against the type already there.
Status Unify(std::map<std::string, TensorType>* types, const std::string& tensor, TensorType type,
             const std::string& ensemble, const std::string& step) {
  auto [it, added] = types->emplace(tensor, type);
  if (added) return Status::Ok();
  return CheckConsistent(it->second, type, "in ensemble " + ensemble + ", " + step + ", ensemble tensor " + tensor + ": ");
}

Status CheckStepMapping(const std::string& ensemble, size_t index, const inference::ModelEnsembling::Step& step,
                        const inference::ModelConfig& model, std::map<std::string, TensorType>* types) {
  const std::string& name = step.model_name();
  const std::string label = StepLabel(index, name);
  const std::string in = "in ensemble " + ensemble + ", " + label + ", ";
  const bool batching = model.max_batch_size() > 0;
  for (const auto& mapping : Sorted(step.input_map())) {
    const std::string& model_input = mapping.first;
    const std::string& tensor = mapping.second;
    const auto found = std::find_if(model.input().begin(), model.input().end(),
                                    [&](const auto& i) { return i.name() == model_input; });
    if (found == model.input().end()) {
      return Unavailable(in + "ensemble tensor " + tensor + " is mapping to non-existing input " + model_input +
                         " in model " + name);
    }
    ORTSERVE_RETURN_IF_ERROR(
        Unify(types, tensor, MakeType(name, batching, found->data_type(), found->dims()), ensemble, label));
  }
  for (const auto& input : model.input()) {
    if (!step.input_map().count(input.name()) && !input.optional()) {
      return Unavailable(in + "input " + input.name() + " in model " + name + " is not mapped to any ensemble tensors");
    }
  }
  for (const auto& mapping : Sorted(step.output_map())) {
    const std::string& model_output = mapping.first;
    const std::string& tensor = mapping.second;
    const auto found = std::find_if(model.output().begin(), model.output().end(),
                                    [&](const auto& o) { return o.name() == model_output; });
    if (found == model.output().end()) {
      return Unavailable(in + "ensemble tensor " + tensor + " is mapped from non-existing output " + model_output +
                         " in model " + name);
    }
    ORTSERVE_RETURN_IF_ERROR(
        Unify(types, tensor, MakeType(name, batching, found->data_type(), found->dims()), ensemble, label));
  }
  return Status::Ok();
}

}  // namespace

bool IsEnsemble(const inference::ModelConfig& config) {
  return config.platform() == kEnsemblePlatform || config.has_ensemble_scheduling();
}

std::string StepLabel(size_t index, const std::string& model_name) {
  return "step " + std::to_string(index) + " (model '" + model_name + "')";
}

Status CheckEnsembleScheduling(const inference::ModelConfig& config) {
  const std::string& name = config.name();
  if (config.platform() != kEnsemblePlatform) {
    return Unavailable("ensemble scheduling cannot be set for model '" + name + "' whose platform is not " +
                       kEnsemblePlatform);
  }
  if (!config.backend().empty()) {
    return Unavailable("Ensemble model '" + name + "' must have platform type '" + kEnsemblePlatform +
                       "' and empty backend type");
  }
  if (!config.has_ensemble_scheduling()) {
    return Unavailable("ensemble scheduling must be set for ensemble " + name + " whose platform is " +
                       kEnsemblePlatform);
  }
  if (config.instance_group_size() != 0) {
    return Unavailable("instance group should not be specified for ensemble '" + name + "'");
  }
  if (config.has_optimization()) return Unavailable("optimization should not be specified for ensemble '" + name + "'");
  if (config.model_warmup_size() != 0) {
    return Unavailable("model_warmup can not be specified for ensemble '" + name + "'");
  }
  if (config.ensemble_scheduling().step_size() == 0) return Unavailable("must specify 'step' for ensemble '" + name + "'");
  auto graph = BuildGraph(config);
  if (!graph.ok()) return graph.status();
  ORTSERVE_RETURN_IF_ERROR(CheckInputsNotProduced(config, graph.value()));
  if (std::string cycle = FindCycle(config, graph.value()); !cycle.empty()) {
    return Unavailable("ensemble '" + name + "' has a cycle: " + cycle);
  }
  return CheckDataFlow(config, graph.value());
}

Status CheckEnsembleAgainstModels(const inference::ModelConfig& config,
                                  const std::vector<const inference::ModelConfig*>& step_configs) {
  const std::string& ensemble = config.name();
  const bool batching = config.max_batch_size() > 0;
  std::map<std::string, TensorType> types;
  for (const auto& input : config.input()) {
    types.emplace(input.name(), MakeType(ensemble, batching, input.data_type(),
                                         input.has_reshape() ? input.reshape().shape() : input.dims()));
  }
  for (const auto& output : config.output()) {
    types.emplace(output.name(), MakeType(ensemble, batching, output.data_type(),
                                          output.has_reshape() ? output.reshape().shape() : output.dims()));
  }
  const Steps& steps = config.ensemble_scheduling().step();
  for (size_t i = 0; i < step_configs.size() && i < static_cast<size_t>(steps.size()); ++i) {
    const auto& step = steps[static_cast<int>(i)];
    const inference::ModelConfig& model = *step_configs[i];
    // A batching ensemble may hold non-batching models as long as the full shapes agree.
    if (model.max_batch_size() != 0 && model.max_batch_size() < config.max_batch_size()) {
      return Unavailable("ensemble " + ensemble + " allows maximum batch size " +
                         std::to_string(config.max_batch_size()) + ", but it contains model " + step.model_name() +
                         " which only allows maximum batch size to be " + std::to_string(model.max_batch_size()) +
                         " (" + StepLabel(i, step.model_name()) + ")");
    }
    ORTSERVE_RETURN_IF_ERROR(CheckStepMapping(ensemble, i, step, model, &types));
  }
  return Status::Ok();
}

Status EnsembleDependencyError(const std::string& ensemble, const EnsembleStep& step) {
  if (step.model_version > 0) {
    return Unavailable("ensemble '" + ensemble + "' depends on '" + step.model_name + "' whose required version " +
                       std::to_string(step.model_version) + " is not loaded.");
  }
  return Unavailable("ensemble '" + ensemble + "' depends on '" + step.model_name + "' which has no loaded version.");
}

EnsemblePlan MakeEnsemblePlan(const inference::ModelConfig& config) {
  EnsemblePlan plan;
  plan.name = config.name();
  const Steps& steps = config.ensemble_scheduling().step();
  for (size_t i = 0; i < static_cast<size_t>(steps.size()); ++i) {
    const auto& step = steps[static_cast<int>(i)];
    plan.steps.push_back(
        {i, step.model_name(), step.model_version() > 0 ? step.model_version() : -1, Sorted(step.input_map()), Sorted(step.output_map())});
  }
  for (const auto& input : config.input()) plan.inputs.push_back(input.name());
  for (const auto& output : config.output()) plan.outputs.push_back(output.name());
  return plan;
}

}  // namespace ortserve
