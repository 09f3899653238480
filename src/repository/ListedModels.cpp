#include "repository/ListedModels.h"

#include <exception>
#include <vector>

namespace ortserve {

ListedModels::ListedModels(Prepare prepare, Stamp stamp, Keep keep)
    : prepare_(std::move(prepare)), stamp_(std::move(stamp)), keep_(std::move(keep)) {}

ListedModels::Listed ListedModels::Get(const std::string& name) {
  // Taken before the preparation reads the folder: a change during it makes
  // the next request prepare again.
  std::string stamp = stamp_(name);
  std::promise<std::shared_ptr<const Prepared>> promise;
  {
    MutexLock lock(mu_);
    auto found = entries_.find(name);
    if (found != entries_.end() && found->second.stamp == stamp) {
      Outcome outcome = found->second.outcome;
      lock.Unlock();
      return outcome.get()->listed;
    }
    if (found == entries_.end()) DropUnwanted();
    entries_[name] = Entry{std::move(stamp), promise.get_future().share()};
  }
  std::shared_ptr<const Prepared> prepared;
  try {
    prepared = std::make_shared<const Prepared>(prepare_(name));
  } catch (const std::exception& e) {  // never leaves the waiters without an answer
    prepared = std::make_shared<const Prepared>(Prepared{Unavailable("model '" + name + "': " + e.what()), nullptr});
  }
  promise.set_value(prepared);
  return prepared->listed;
}

std::shared_ptr<const PreparedModel> ListedModels::Reuse(const std::string& name) {
  std::string stamp = stamp_(name);
  Outcome outcome;
  {
    MutexLock lock(mu_);
    auto found = entries_.find(name);
    if (found == entries_.end() || found->second.stamp != stamp) return nullptr;
    outcome = found->second.outcome;
  }
  return outcome.get()->model;
}

void ListedModels::Forget(const std::string& name) {
  MutexLock lock(mu_);
  entries_.erase(name);
}

size_t ListedModels::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

void ListedModels::DropUnwanted() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = keep_(it->first) ? std::next(it) : entries_.erase(it);
  }
}

}  // namespace ortserve
