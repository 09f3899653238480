#include "server/http/ConnectionDeadlines.h"

namespace ortserve::http {

void ConnectionDeadlines::Watch(std::weak_ptr<SessionBase> session) {
  if (stopped_) return;
  sessions_.push_back(std::move(session));
  if (!armed_) Arm();
}

void ConnectionDeadlines::Stop() {
  stopped_ = true;
  timer_.cancel();
}

void ConnectionDeadlines::Arm() {
  armed_ = true;
  timer_.expires_after(kTick);
  timer_.async_wait([this](boost::system::error_code ec) { Sweep(ec); });
}

void ConnectionDeadlines::Sweep(boost::system::error_code ec) {
  armed_ = false;
  if (ec) return;
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < sessions_.size();) {
    if (auto session = sessions_[i].lock(); session && session->CheckDeadline(now)) {
      ++i;
    } else {  // closed or gone: unordered removal
      sessions_[i] = std::move(sessions_.back());
      sessions_.pop_back();
    }
  }
  if (!sessions_.empty()) Arm();
}

}  // namespace ortserve::http
