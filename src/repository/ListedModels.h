#pragma once
// What ModelRepository::Listed answers for the models of an on-demand
// repository that are not loaded, kept per model: preparing a model folder
// (its config read and completed, each version's signature checked and
// model file inspected by ONNX Runtime) hashes files and opens the model,
// which is too much to do again for every metadata, config or ready request
// on a front end's thread. The outcome of a preparation, an error included,
// is kept with the folder's stamp taken before it (ListedStamp); a request
// finds it again while the stamp is unchanged, and a changed folder is
// prepared again.
//
// Bounded: one entry per model. Forget drops one; every new entry first
// drops the entries whose model `keep` no longer wants (its folder removed,
// or a version of it loaded).
//
// Thread-safe. A preparation runs on the caller's thread, outside the lock;
// requests for the same model and stamp meanwhile wait for it rather than
// prepare the folder once more.
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>

#include "core/Mutex.h"
#include "repository/ModelRepository.h"

namespace ortserve {

class ListedModels {
 public:
  using Listed = Result<ModelRepository::ListedModel>;
  using Prepare = std::function<Listed(const std::string& name)>;
  using Stamp = std::function<std::string(const std::string& name)>;
  using Keep = std::function<bool(const std::string& name)>;

  ListedModels(Prepare prepare, Stamp stamp, Keep keep);

  // `name`'s kept outcome when its stamp is unchanged, else prepares it.
  Listed Get(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  // Drops `name`'s entry, if any.
  void Forget(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  size_t size() const ORTSERVE_EXCLUDES(mu_);

 private:
  using Outcome = std::shared_future<std::shared_ptr<const Listed>>;
  struct Entry {
    std::string stamp;
    Outcome outcome;
  };
  void DropUnwanted() ORTSERVE_REQUIRES(mu_);

  const Prepare prepare_;
  const Stamp stamp_;
  const Keep keep_;
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ ORTSERVE_GUARDED_BY(mu_);
};

}  // namespace ortserve
