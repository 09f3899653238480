#pragma once
// What ModelRepository::Listed answers for the models of an on-demand
// repository that are not loaded, kept per model: preparing a model folder
// (its config read and completed, each version's signature checked and
// model file inspected by ONNX Runtime) hashes files and opens the model,
// which is too much to do again for every metadata, config or ready request
// on a front end's thread. The outcome of a preparation, an error included,
// is kept with the folder's stamp taken before it (ListedStamp); a request
// finds it again while the stamp is unchanged, and a changed folder is
// prepared again. The preparation itself is kept with it, so that the
// model's on-demand load takes it (Reuse) rather than preparing the
// unchanged folder once more.
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

struct PreparedModel;

class ListedModels {
 public:
  using Listed = Result<ModelRepository::ListedModel>;
  // A preparation's outcome: the answer to Listed and what a load needs
  // (null: nothing for a load to take).
  struct Prepared {
    Listed listed;
    std::shared_ptr<const PreparedModel> model;
  };
  using Prepare = std::function<Prepared(const std::string& name)>;
  using Stamp = std::function<std::string(const std::string& name)>;
  using Keep = std::function<bool(const std::string& name)>;

  ListedModels(Prepare prepare, Stamp stamp, Keep keep);

  // `name`'s kept outcome when its stamp is unchanged, else prepares it.
  Listed Get(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  // `name`'s kept preparation while its stamp is unchanged (waiting for one
  // under way); null when there is none or the folder changed since.
  std::shared_ptr<const PreparedModel> Reuse(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  // Drops `name`'s entry, if any.
  void Forget(const std::string& name) ORTSERVE_EXCLUDES(mu_);
  size_t size() const ORTSERVE_EXCLUDES(mu_);

 private:
  using Outcome = std::shared_future<std::shared_ptr<const Prepared>>;
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
