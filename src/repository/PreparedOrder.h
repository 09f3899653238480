#pragma once
// How a set of prepared models is completed and ordered before it loads,
// shared by the loader (ModelLoader) and the offline check (RepositoryCheck):
// composing models added, ensemble cycles failed, fallbacks before the models
// that name them, ensembles after their composing models.
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
// Ensembles after the models their steps name (ensembles of ensembles after theirs).
void EnsemblesLast(std::vector<PreparedModel>& prepared);
// Each ensemble on a cycle of ensembles fails, in Triton's words.
void FailEnsembleCycles(std::vector<PreparedModel>& prepared);
// Fallback models before the models that name them.
void FallbacksFirst(std::vector<PreparedModel>& prepared);

}  // namespace ortserve
