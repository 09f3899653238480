#include "repository/ReferenceCheck.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "config/ConfigChecks.h"
#include "config/EnsembleGraph.h"
#include "config/ReferenceConfig.h"
#include "config/RuntimeConfig.h"
#include "core/Text.h"
#include "repository/ReferenceSamples.h"
#include "runtime/NumericalComparison.h"
#include "runtime/OrtModelInstance.h"

namespace ortserve {
namespace {

std::string Label(const Candidate& c) { return c.name + ":" + std::to_string(c.version); }

// One output's figures over every sample.
struct OutputFigures {
  OutputTally tally;
  std::string mismatch;  // a type/shape/name difference, or a differing non-floating output
};

// The inputs the check runs: the reference_samples folder, or every warm-up sample once.
Result<std::vector<std::vector<Tensor>>> CheckInputs(const Candidate& c, const ReferenceConfig& reference,
                                                     const std::vector<WarmupSample>& warmup) {
  std::vector<std::vector<Tensor>> inputs;
  if (!reference.samples_dir.empty()) {
    auto read = ReadReferenceSamples(c.config, c.model_dir / reference.samples_dir);
    if (!read.ok()) return Unavailable(read.status().message());
    inputs.push_back(std::move(read).value());
    return inputs;
  }
  for (const WarmupSample& sample : warmup) inputs.push_back(sample.inputs);
  if (inputs.empty()) return Unavailable("parameter 'reference_model': there are no warm-up samples to compare on");
  return inputs;
}

// The referenced model, READY and compatible, or why not.
Result<ReferencedModel> FindCompatible(const Candidate& c, const ReferenceConfig& reference,
                                       const FindReferencedModel& find) {
  const std::string what = std::string("parameter '") + kReferenceModelParameter + "': " + reference.Describe();
  std::optional<ReferencedModel> found = find ? find(reference.model_name, reference.model_version) : std::nullopt;
  if (!found) {
    return Unavailable(what + " is not READY (it must be a model of this repository, loaded before this one; with "
                              "--model-control-mode=explicit, load it first)");
  }
  if (IsEnsemble(found->config)) {
    return Unavailable(what + " is an ensemble: it has no model file to compare with; name one of its models");
  }
  Status compatible = CheckReferenceCompatible(c.config, found->config);
  if (!compatible.ok()) return Unavailable(what + " does not match this model: " + compatible.message());
  return std::move(*found);
}

Result<std::unique_ptr<ModelInstance>> ReferenceInstance(const Candidate& c, const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Unavailable("parameter 'reference_model': no file " + path.string());
  }
  // One CPU thread: the reference runs a handful of samples once, at load.
  RuntimeOptions options = MakeRuntimeOptions(c.settings, 1, InstanceSpec{}, path.string(), Label(c) + " reference");
  auto instance = CreateOrtModelInstance(options);
  if (!instance.ok()) {
    return Unavailable("parameter 'reference_model': cannot load " + path.string() + ": " +
                       instance.status().message());
  }
  return instance;
}

void Accumulate(const std::vector<Tensor>& served, const std::vector<Tensor>& expected,
                std::map<std::string, OutputFigures>* figures) {
  for (const Tensor& a : served) {
    OutputFigures& f = (*figures)[a.name];
    const Tensor* e = FindTensor(expected, a.name);
    if (!e) {
      f.mismatch = "the reference model has no output '" + a.name + "'";
      continue;
    }
    // No tolerance here: the thresholds apply to the figures over every sample (Passes).
    const OutputComparison compared = CompareOutput(a, *e, std::numeric_limits<double>::infinity());
    if (!compared.report.passed && f.mismatch.empty()) f.mismatch = compared.report.detail;
    f.tally.Add(compared);
  }
}

std::string Describe(const std::string& output, const OutputFigures& f) {
  const Top1Agreement& top1 = f.tally.top1;
  std::string text = fmt::format("output '{}': max abs diff {:.4g}", output, f.tally.max_abs);
  if (f.tally.has_classes && top1.rows > 0) {
    text += fmt::format(", top-1 agreement {:.4g} ({}/{})", static_cast<double>(top1.agreeing) / top1.rows,
                        top1.agreeing, top1.rows);
  }
  if (!f.mismatch.empty()) text += " (" + f.mismatch + ")";
  return text;
}

bool Passes(const ReferenceConfig& reference, const OutputFigures& f) {
  const Top1Agreement& top1 = f.tally.top1;
  if (!f.mismatch.empty()) return false;
  if (reference.tolerance && !(f.tally.max_abs <= *reference.tolerance)) return false;
  if (reference.min_agreement && f.tally.has_classes && top1.rows > 0 &&
      static_cast<double>(top1.agreeing) / top1.rows < *reference.min_agreement) {
    return false;
  }
  return true;
}

std::string Thresholds(const ReferenceConfig& reference) {
  std::vector<std::string> parts;
  if (reference.tolerance) parts.push_back(fmt::format("reference_tolerance {:g}", *reference.tolerance));
  if (reference.min_agreement) parts.push_back(fmt::format("reference_min_agreement {:g}", *reference.min_agreement));
  return Join(parts);
}

}  // namespace

Result<std::optional<std::filesystem::path>> FindReferenceFile(const Candidate& c, const FindReferencedModel& find) {
  if (!c.reference) return std::optional<std::filesystem::path>();
  const ReferenceConfig& reference = *c.reference;
  if (reference.model_name.empty()) {
    return std::optional(std::filesystem::path(c.model_path).parent_path() / reference.model_file);
  }
  auto found = FindCompatible(c, reference, find);
  if (!found.ok()) return found.status();
  return std::optional(c.model_dir.parent_path() / reference.model_name / std::to_string(found->version) /
                       found->config.default_model_filename());
}

Status CheckReferencedModel(const Candidate& c, const FindReferencedModel& find) {
  return FindReferenceFile(c, find).status();
}

Status CheckAgainstReference(const Candidate& c, ModelInstance& served, const std::vector<WarmupSample>& warmup,
                             const std::optional<std::filesystem::path>& reference_file) {
  if (!c.reference || !reference_file) return Status::Ok();
  const ReferenceConfig& reference = *c.reference;
  auto inputs = CheckInputs(c, reference, warmup);
  if (!inputs.ok()) return inputs.status();
  auto instance = ReferenceInstance(c, *reference_file);
  if (!instance.ok()) return instance.status();
  std::map<std::string, OutputFigures> figures;
  for (const std::vector<Tensor>& sample : inputs.value()) {
    std::vector<Tensor> actual, expected;
    Status st = served.Run(sample, &actual);
    if (!st.ok()) {
      return Unavailable("reference check: the version failed on its samples (configure model_warmup or "
                         "reference_samples with inputs valid for the model): " + st.message());
    }
    st = instance.value()->Run(sample, &expected);
    if (!st.ok()) return Unavailable("reference check: reference " + reference.Describe() + " failed: " + st.message());
    Accumulate(actual, expected, &figures);
  }
  std::vector<std::string> failed, all;
  for (const auto& [output, f] : figures) {
    all.push_back(Describe(output, f));
    if (!Passes(reference, f)) failed.push_back(all.back());
  }
  const std::string against =
      fmt::format("reference check against {} on {} sample(s)", reference.Describe(), inputs->size());
  if (!failed.empty()) {
    return Unavailable(against + " failed: " + Join(failed, "; ") + " (thresholds: " + Thresholds(reference) + ")");
  }
  spdlog::info("model '{}': {} passed: {} (thresholds: {})", Label(c), against, Join(all, "; "), Thresholds(reference));
  return Status::Ok();
}

}  // namespace ortserve
