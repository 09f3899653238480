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
  std::promise<std::shared_ptr<const Listed>> promise;
  {
    MutexLock lock(mu_);
    auto found = entries_.find(name);
    if (found != entries_.end() && found->second.stamp == stamp) {
      Outcome outcome = found->second.outcome;
      lock.Unlock();
      return *outcome.get();
    }
    if (found == entries_.end()) DropUnwanted();
    entries_[name] = Entry{std::move(stamp), promise.get_future().share()};
  }
  std::shared_ptr<const Listed> listed;
  try {
    listed = std::make_shared<const Listed>(prepare_(name));
  } catch (const std::exception& e) {  // never leaves the waiters without an answer
    listed = std::make_shared<const Listed>(Unavailable("model '" + name + "': " + e.what()));
  }
  promise.set_value(listed);
  return *listed;
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
