#pragma once
// How a model finds other served models at request time (an ensemble its
// composing models): a given version, or the newest READY one, while the
// repository exists. Shared by the repository and every model it loaded (a
// model may outlive the repository: then it finds nothing). Thread-safe;
// lookups run in parallel.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/Mutex.h"
#include "serving/Model.h"

namespace ortserve {

class ModelLookup {
 public:
  // `version` <= 0: the newest READY version. Null: none READY.
  using Find = std::function<std::shared_ptr<Model>(const std::string& name, int64_t version)>;
  explicit ModelLookup(Find find) : find_(std::move(find)) {}

  std::shared_ptr<Model> Ready(const std::string& name, int64_t version) const ORTSERVE_EXCLUDES(mu_) {
    ReaderLock lock(mu_);
    return find_ ? find_(name, version) : nullptr;
  }
  // The repository is going away: nothing is found from here on.
  void Detach() ORTSERVE_EXCLUDES(mu_) {
    WriterLock lock(mu_);
    find_ = nullptr;
  }

 private:
  mutable SharedMutex mu_;
  Find find_ ORTSERVE_GUARDED_BY(mu_);
};

}  // namespace ortserve
