#include "repository/ModelBuilder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "config/ConfigChecks.h"
#include "config/ConfigParse.h"
#include "config/EnsembleGraph.h"
#include "core/ThreadName.h"
#include "pipeline/EnsembleScheduler.h"
#include "repository/ReferenceCheck.h"
#include "repository/Warmup.h"
#include "serving/InputDrift.h"
#include "runtime/OrtModelInstance.h"
#include "scheduler/DynamicBatcher.h"
#include "scheduler/SequenceBatcher.h"

namespace ortserve {
namespace {

using Instances = std::vector<std::unique_ptr<ModelInstance>>;

std::string Label(const Candidate& c) { return c.name + ":" + std::to_string(c.version); }

// CheckFallback against the fallback's newest loaded version, if any.
Status CheckFallbackAtLoad(const Candidate& c, const FallbackLookup* fallbacks) {
  const std::string fallback = FallbackModelName(c.config);
  std::shared_ptr<ServedModel> target = fallbacks && !fallback.empty() ? fallbacks->Latest(fallback) : nullptr;
  ORTSERVE_RETURN_IF_ERROR(CheckFallback(c, target ? &target->config() : nullptr));
  if (target) {
    spdlog::info("model '{}': fallback model '{}' (version {} checked compatible)", Label(c), fallback,
                 target->version());
  }
  return Status::Ok();
}

// The cache the model's answers go to: null unless its config enables
// response_cache and the server has a cache (then it says so once).
Result<std::shared_ptr<ResponseCache>> ResponseCacheFor(const Candidate& c, const ModelBuildContext& context) {
  if (!c.config.response_cache().enable()) return std::shared_ptr<ResponseCache>();
  ORTSERVE_RETURN_IF_ERROR(CheckResponseCacheUse(c));
  if (!context.response_cache) {
    spdlog::warn("model '{}': response_cache is enabled but the server has no cache (--cache-config "
                 "local,size=BYTES); its answers are not cached",
                 Label(c));
  }
  return context.response_cache;
}

// Where CPU sessions keep their optimized graphs: only when the operator
// named a --model-cache-dir (never a temp dir nobody asked for).
std::string OptimizedModelCacheDir(const std::string& model_cache_dir) {
  return model_cache_dir.empty() ? std::string() : (std::filesystem::path(model_cache_dir) / "optimized").string();
}

// The weights a version's CPU instances share: null for a single CPU
// instance (nothing to share with; mapping its weights can cost memory,
// docs/decisions.md, "Instances share their weights") or when ORT cannot
// make the container. GPU kernels pre-pack into device memory, which ORT
// does not share.
std::shared_ptr<SharedWeights> SharedCpuWeights(const Candidate& c) {
  const auto cpu_instances = std::count_if(c.instances.begin(), c.instances.end(),
                                           [](const InstanceSpec& i) { return !i.gpu; });
  if (cpu_instances < 2) return nullptr;
  try {
    return CreateSharedWeights();
  } catch (const std::exception& e) {
    spdlog::warn("model '{}': instances keep their own weights: {}", Label(c), e.what());
    return nullptr;
  }
}

Result<Instances> CreateInstances(const Candidate& c, const ThreadPlanEntry& plan, const std::string& cache_dir,
                                  const std::shared_ptr<SharedWeights>& cpu_weights) {
  Instances instances;
  for (size_t i = 0; i < c.instances.size(); ++i) {
    RuntimeOptions options = MakeRuntimeOptions(c.settings, plan.intra, c.instances[i], c.model_path,
                                                Label(c) + "#" + std::to_string(i), cache_dir);
    options.shared_thread_pool = plan.shared_pool;
    if (!c.instances[i].gpu) options.shared_weights = cpu_weights;
    options.optimized_model_cache_dir = OptimizedModelCacheDir(cache_dir);
    // ORT's own intra-op threads (a model with pools of its own) are created
    // here and inherit this name.
    ScopedThreadName ort_threads("ort-" + c.name);
    auto instance = CreateOrtModelInstance(options);
    if (!instance.ok()) {
      return Unavailable("cannot create instance #" + std::to_string(i) + ": " + instance.status().message());
    }
    instances.push_back(std::move(instance).value());
  }
  return instances;
}

// Runs every warm-up sample on every instance. A configured model_warmup is
// strict; the default warm-up's guessed data (dynamic dims -> 1, empty
// strings) may simply be invalid for the model, so its failure only warns.
Status WarmUp(const Candidate& c, const std::vector<WarmupSample>& samples, Instances& instances) {
  const bool configured = c.config.model_warmup_size() > 0;
  for (size_t i = 0; i < instances.size(); ++i) {
    for (const WarmupSample& sample : samples) {
      for (int n = 0; n < sample.count; ++n) {
        std::vector<Tensor> outputs;
        Status st = instances[i]->Run(sample.inputs, &outputs);
        if (st.ok()) continue;
        if (!configured && sample.best_effort) {
          spdlog::warn("model '{}': default warm-up '{}' with guessed data failed on instance #{} ({}); "
                       "skipping the default warm-up",
                       Label(c), sample.name, i, st.message());
          return Status::Ok();
        }
        return Unavailable("warm-up '" + sample.name + "' failed on instance #" + std::to_string(i) + ": " +
                           st.message());
      }
    }
  }
  return Status::Ok();
}

// The part of a load that needs sessions: creates the instances, runs the
// warm-up on each and checks the first against the reference model.
Result<Instances> StartInstances(const Candidate& c, const ThreadPlanEntry& plan, const std::string& cache_dir,
                                 const std::shared_ptr<SharedWeights>& cpu_weights,
                                 const FindReferencedModel& find_reference, std::vector<WarmupSample>* samples) {
  auto reference_file = FindReferenceFile(c, find_reference);
  if (!reference_file.ok()) return reference_file.status();
  auto instances = CreateInstances(c, plan, cache_dir, cpu_weights);
  if (!instances.ok()) return instances.status();
  auto built = BuildWarmupSamples(c.config, c.model_dir, c.sequence_options ? &c.sequence_options->sequence : nullptr);
  if (!built.ok()) return Unavailable("warm-up: " + built.status().message());
  *samples = std::move(built).value();
  ORTSERVE_RETURN_IF_ERROR(WarmUp(c, *samples, instances.value()));
  ORTSERVE_RETURN_IF_ERROR(CheckAgainstReference(c, *instances.value().front(), *samples, *reference_file));
  return instances;
}

// The READY models a reference_model "model:<name>" may name.
FindReferencedModel ReadyReferences(std::shared_ptr<const ModelLookup> models) {
  return [models = std::move(models)](const std::string& name, int64_t version) -> std::optional<ReferencedModel> {
    std::shared_ptr<Model> model = models ? models->Ready(name, version) : nullptr;
    if (!model || !model->ready()) return std::nullopt;
    return ReferencedModel{model->config(), std::stoll(model->version())};
  };
}

// Why `s` asks for ORT thread pools of its own ("" when it does not).
std::string OwnPoolReason(const OrtSessionSettings& s) {
  if (s.own_thread_pool) return "ort_thread_pool own";
  if (s.intra_op_threads > 0) return "intra_op_thread_count";
  if (s.execution_mode == ExecutionMode::kParallel) return "execution_mode 1";
  if (s.allow_spinning) return "allow_spinning";
  return "";
}

ComputePolicy MakeComputePolicy(const Candidate& c, const ThreadPlanEntry& plan, const ModelBuildContext& context) {
  ComputePolicy compute;
  compute.slots = context.compute_slots;
  compute.slots_per_run = plan.run_threads;
  // Opt-in (instance_batches: shared), and never on GPU instances: on one
  // device a larger batch beats concurrent halves.
  compute.balance_across_instances =
      c.batcher_options.compute.balance_across_instances &&
      std::none_of(c.instances.begin(), c.instances.end(), [](const InstanceSpec& i) { return i.gpu; });
  compute.inline_run_max_us = c.batcher_options.compute.inline_run_max_us;
  return compute;
}

// The config's kind of scheduler: the sequence batcher for sequence_batching,
// the dynamic batcher (which also runs models without batching) otherwise.
Result<std::unique_ptr<Scheduler>> MakeScheduler(const Candidate& c, const ThreadPlanEntry& plan,
                                                 const ModelBuildContext& context, Instances instances,
                                                 ServedModel* model) {
  if (c.sequence_options) {
    SequenceBatcherOptions options = *c.sequence_options;
    options.batcher.compute = MakeComputePolicy(c, plan, context);
    options.batcher.compute.balance_across_instances = false;  // a sequence's instance is fixed
    auto batcher =
        SequenceBatcher::Create(std::move(options), std::move(instances), &model->stats(), model->completer());
    if (!batcher.ok()) return Unavailable("cannot start scheduler: " + batcher.status().message());
    return std::unique_ptr<Scheduler>(std::move(batcher).value());
  }
  DynamicBatcherOptions options = c.batcher_options;
  options.compute = MakeComputePolicy(c, plan, context);
  auto batcher = DynamicBatcher::Create(std::move(options), std::move(instances), &model->stats(), model->completer());
  if (!batcher.ok()) return Unavailable("cannot start scheduler: " + batcher.status().message());
  return std::unique_ptr<Scheduler>(std::move(batcher).value());
}

// The first instance's: later ones read what it saved.
const char* CacheUseText(ModelCacheUse use) {
  switch (use) {
    case ModelCacheUse::kOff: return "off";
    case ModelCacheUse::kMiss: return "miss";
    case ModelCacheUse::kHit: return "hit";
  }
  return "off";
}

std::string SchedulingText(const Candidate& c) {
  if (c.sequence_options) {
    const SequencePolicy& s = c.sequence_options->sequence;
    return std::string(", sequence batching (") +
           (s.strategy == SequencePolicy::Strategy::kOldest ? "oldest" : "direct") + ", " +
           std::to_string(s.slots_per_instance * c.instances.size()) + " slots, " + std::to_string(s.states.size()) +
           " implicit state(s))";
  }
  std::string text = c.config.has_dynamic_batching() ? ", dynamic batching" : "";
  if (c.config.response_cache().enable()) text += ", response cache";
  return text;
}

// The version's drift statistics; null without drift_* parameters.
std::shared_ptr<InputDrift> DriftFor(const Candidate& c) {
  if (!c.drift) return nullptr;
  return std::make_shared<InputDrift>(c.config, *c.drift, c.drift_reference);
}

// The version's shadow comparison: null without shadow_* parameters and for
// the shadow version itself. Shadow runs of this version in flight are
// bounded by the shadow version's instance count (the same config), so that
// they never queue more than one run per instance.
std::shared_ptr<ShadowComparison> ShadowFor(const Candidate& c, const ModelBuildContext& context) {
  if (!c.shadow || c.shadow->version == c.version || !context.models) return nullptr;
  std::vector<std::string> outputs;
  for (const auto& output : c.config.output()) outputs.push_back(output.name());
  ShadowComparison::Submit submit = [models = context.models, name = c.name,
                                     version = c.shadow->version](std::unique_ptr<InferenceRequest>& request) {
    auto target = std::dynamic_pointer_cast<ServedModel>(models->Ready(name, version));
    return target && target->TryShadow(request);
  };
  return std::make_shared<ShadowComparison>(c.name, std::to_string(c.version), *c.shadow, std::move(outputs),
                                            c.instances.size(), std::move(submit));
}

// An ensemble: its steps checked against the composing models' complete
// configs (as Triton, once they are loaded), then its scheduler.
Result<std::shared_ptr<ServedModel>> BuildEnsemble(const Candidate& c, const ModelBuildContext& context,
                                                   std::shared_ptr<ResponseCache> cache) {
  const auto start = std::chrono::steady_clock::now();
  EnsemblePlan plan = MakeEnsemblePlan(c.config);
  std::vector<std::shared_ptr<Model>> composing;
  ORTSERVE_RETURN_IF_ERROR(CheckEnsembleSteps(c, [&](const EnsembleStep& step) -> const inference::ModelConfig* {
    std::shared_ptr<Model> model = context.models ? context.models->Ready(step.model_name, step.model_version) : nullptr;
    if (!model || !model->ready()) return nullptr;
    composing.push_back(model);
    return &model->config();
  }));
  const std::string version = std::to_string(c.version);
  const size_t steps = plan.steps.size();
  auto model = std::make_shared<ServedModel>(c.config, version, plan.outputs, context.fallbacks, c.labels,
                                             std::move(cache), DriftFor(c));
  auto scheduler = std::make_unique<EnsembleScheduler>(std::move(plan), version, c.config.max_batch_size() > 0,
                                                       context.models, &model->stats(), model->completer());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  model->stats().load_duration_ns.store(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
  model->Start(std::move(scheduler));
  spdlog::info("model '{}' version {} READY (ensemble of {} step(s), max_batch_size {})", c.name, c.version, steps,
               c.config.max_batch_size());
  return model;
}

}  // namespace

Status CheckFallback(const Candidate& c, const inference::ModelConfig* fallback_config) {
  const std::string fallback = FallbackModelName(c.config);
  if (fallback.empty()) return Status::Ok();
  if (fallback == c.name) return Unavailable("parameter fallback_model names the model itself");
  if (!fallback_config) {
    spdlog::warn("model '{}': fallback model '{}' is not loaded; requests fall back to it once it "
                 "is READY (and compatible)",
                 Label(c), fallback);
    return Status::Ok();
  }
  Status compatible = CheckFallbackCompatible(c.config, *fallback_config);
  if (!compatible.ok()) {
    return Unavailable("fallback_model '" + fallback + "' cannot serve this model's requests: " +
                       compatible.message());
  }
  return Status::Ok();
}

Status CheckResponseCacheUse(const Candidate& c) {
  if (c.config.response_cache().enable() && c.sequence_options) {
    return Unavailable("Response Cache does not currently support model " + c.name +
                       " with sequence batching scheduler. Please disable the response cache.");
  }
  return Status::Ok();
}

Status CheckEnsembleSteps(const Candidate& c,
                          const std::function<const inference::ModelConfig*(const EnsembleStep&)>& ready_config) {
  std::vector<const inference::ModelConfig*> configs;
  for (const EnsembleStep& step : MakeEnsemblePlan(c.config).steps) {
    const inference::ModelConfig* config = ready_config(step);
    if (!config) return EnsembleDependencyError(c.name, step);
    configs.push_back(config);
  }
  return CheckEnsembleAgainstModels(c.config, configs);
}

Status CheckSessions(const Candidate& c, const ThreadPlanEntry& plan, const FindReferencedModel& find_reference) {
  if (IsEnsemble(c.config)) return Status::Ok();
  std::vector<WarmupSample> samples;
  auto instances = StartInstances(c, plan, /*cache_dir=*/"", SharedCpuWeights(c), find_reference, &samples);
  return instances.status();
}

ThreadPlanRequest PlanRequest(const Candidate& c) {
  ThreadPlanRequest r;
  r.label = c.name + ":" + std::to_string(c.version);
  r.instances = static_cast<int>(c.instances.size());
  r.explicit_intra = c.settings.intra_op_threads;
  r.inter = c.settings.inter_op_threads;
  r.parallel_execution = c.settings.execution_mode == ExecutionMode::kParallel;
  r.allow_spinning = c.settings.allow_spinning;
  r.own_pool_reason = OwnPoolReason(c.settings);
  return r;
}

Result<std::shared_ptr<ServedModel>> BuildModel(const Candidate& c, const ThreadPlanEntry& plan,
                                                const ModelBuildContext& context) {
  const auto start = std::chrono::steady_clock::now();
  ORTSERVE_RETURN_IF_ERROR(CheckFallbackAtLoad(c, context.fallbacks.get()));
  auto cache = ResponseCacheFor(c, context);
  if (!cache.ok()) return cache.status();
  if (IsEnsemble(c.config)) return BuildEnsemble(c, context, std::move(cache).value());
  const std::shared_ptr<SharedWeights> cpu_weights = SharedCpuWeights(c);
  std::vector<WarmupSample> samples;
  auto instances =
      StartInstances(c, plan, context.model_cache_dir, cpu_weights, ReadyReferences(context.models), &samples);
  if (!instances.ok()) return instances.status();
  if (cpu_weights) ReleaseSharedWeightPages(*cpu_weights);
  for (auto& instance : instances.value()) instance->FinishWarmup();
  const ModelCacheUse cache_use = instances.value().front()->cache_use();

  const std::vector<std::string> outputs = instances.value().front()->OutputNames();
  auto model = std::make_shared<ServedModel>(c.config, std::to_string(c.version), outputs, context.fallbacks,
                                             c.labels, std::move(cache).value(), DriftFor(c), ShadowFor(c, context));
  auto scheduler = MakeScheduler(c, plan, context, std::move(instances).value(), model.get());
  if (!scheduler.ok()) return scheduler.status();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  model->stats().load_duration_ns.store(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
  model->stats().load_cache_outcome.store(static_cast<int>(cache_use));
  model->Start(std::move(scheduler).value());
  spdlog::info("model '{}' version {} READY in {} ms ({} instance(s), max_batch_size {}{}, optimized-model cache {})",
               c.name, c.version, std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count(),
               c.instances.size(), c.config.max_batch_size(), SchedulingText(c), CacheUseText(cache_use));
  return model;
}

}  // namespace ortserve
