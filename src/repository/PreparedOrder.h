#pragma once
// How a set of prepared models is completed and ordered before it loads,
// shared by the loader (ModelLoader) and the offline check (RepositoryCheck):
// composing models added, ensemble and reference cycles failed, fallbacks
// before the models that name them, ensembles after their composing models
// and models after the model their reference_model names.
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "repository/ModelPreparation.h"

namespace ortserve {

// The models an ensemble's steps name (none for another model).
std::set<std::string> ComposingModels(const PreparedModel& p);
// Appends the composing models of the ensembles in `prepared` (and theirs)
// that it does not hold yet and that have a directory in `repository`.
void AddComposingModelsOf(std::vector<PreparedModel>& prepared, const std::string& repository,
                          const std::function<PreparedModel(const std::string&)>& prepare);
// The model that `p`'s reference_model names ("model:<name>"); "" when none.
std::string ReferencedModelOf(const PreparedModel& p);
// The models `p` must find READY when it loads: an ensemble's composing
// models, the model its reference_model names.
std::set<std::string> Dependencies(const PreparedModel& p);
// Each model after its Dependencies (and theirs), else in the order given.
void DependentsLast(std::vector<PreparedModel>& prepared);
// Each ensemble on a cycle of ensembles fails, in Triton's words.
void FailEnsembleCycles(std::vector<PreparedModel>& prepared);
// Each model on a cycle of reference_model "model:<name>" fails, naming the cycle.
void FailReferenceCycles(std::vector<PreparedModel>& prepared);
// Fallback models before the models that name them.
void FallbacksFirst(std::vector<PreparedModel>& prepared);

}  // namespace ortserve
