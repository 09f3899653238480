#include "server/common/ClientQuotas.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

namespace ortserve::common {

void TokenBucket::Advance(const QuotaLimit& limit, QuotaClock::time_point now) {
  if (!limit.rate) return;
  if (!started_) {
    started_ = true;
    tokens_ = limit.burst;
  } else if (now > last_) {
    tokens_ += *limit.rate * std::chrono::duration<double>(now - last_).count();
  }
  tokens_ = std::min(tokens_, limit.burst);
  last_ = std::max(last_, now);
}

double TokenBucket::SecondsUntilToken(const QuotaLimit& limit) const {
  if (!limit.rate || tokens_ >= 1) return 0;
  return (1 - tokens_) / *limit.rate;
}

QuotaClock::time_point TokenBucket::FullAt(const QuotaLimit& limit) const {
  if (!limit.rate || tokens_ >= limit.burst) return last_;
  return last_ + std::chrono::duration_cast<QuotaClock::duration>(
                     std::chrono::duration<double>((limit.burst - tokens_) / *limit.rate));
}

namespace {

struct ModelState {
  TokenBucket bucket;
  std::atomic<uint32_t> in_flight{0};
};

// Why a limit refuses now; empty when it admits. Sets *retry_wait to the
// seconds a client is told to wait (Retry-After: 1 s for requests in flight,
// whose end nobody knows) and *token_wait to the seconds until the bucket
// holds a token (0 when the bucket did not refuse).
std::string Refusal(const QuotaLimit& limit, const TokenBucket& bucket, uint32_t in_flight, std::string_view whose,
                    double* retry_wait, double* token_wait) {
  if (limit.max_in_flight && in_flight >= *limit.max_in_flight) {
    *retry_wait = std::max(*retry_wait, 1.0);
    return fmt::format("{} allows at most {} requests in flight", whose, *limit.max_in_flight);
  }
  if (limit.rate && !bucket.HasToken()) {
    *token_wait = std::max(*token_wait, bucket.SecondsUntilToken(limit));
    *retry_wait = std::max(*retry_wait, *token_wait);
    return fmt::format("{} allows {} requests/s (burst {})", whose, *limit.rate, limit.burst);
  }
  return {};
}

// QuotaRejection::pause for a refusal whose bucket holds a token in
// `token_wait_s` (0: refused for requests in flight, which may end any time).
std::chrono::microseconds QuotaPause(double token_wait_s) {
  const double us = std::clamp(token_wait_s * 1e6, double(QuotaRejection::kMinQuotaPause.count()),
                               double(QuotaRejection::kMaxQuotaPause.count()));
  thread_local std::minstd_rand stretch(std::random_device{}());
  const double factor = 1.0 + std::uniform_real_distribution<double>(0.0, 1.0)(stretch);
  return std::chrono::microseconds(static_cast<int64_t>(us * factor));
}

}  // namespace

struct QuotaTicket::State {
  TokenBucket bucket;
  std::atomic<uint32_t> in_flight{0};
  StringMap<ModelState> models;  // only models with a limit for this client
  QuotaClock::time_point full_at{};
};

struct alignas(64) ClientQuotas::Shard {
  std::mutex mu;
  StringMap<std::shared_ptr<QuotaTicket::State>> clients;
  size_t sweep_at = 64;
};

QuotaTicket& QuotaTicket::operator=(QuotaTicket&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    model_in_flight_ = std::exchange(other.model_in_flight_, nullptr);
  }
  return *this;
}

void QuotaTicket::Release() {
  if (!state_) return;
  if (model_in_flight_) model_in_flight_->fetch_sub(1, std::memory_order_relaxed);
  state_->in_flight.fetch_sub(1, std::memory_order_relaxed);
  model_in_flight_ = nullptr;
  state_.reset();
}

ClientQuotas::ClientQuotas(QuotaConfig config, NowFn now)
    : now_(std::move(now)), shards_(std::make_unique<std::array<Shard, kShards>>()) {
  Reload(std::move(config));
}

ClientQuotas::~ClientQuotas() = default;

void ClientQuotas::Reload(QuotaConfig config) {
  std::lock_guard lock(configs_mu_);
  configs_.push_back(std::make_unique<const QuotaConfig>(std::move(config)));
  config_.store(configs_.back().get(), std::memory_order_release);
}

namespace {

// Drops states that a new one would equal (nothing in flight, buckets full);
// past `cap`, idle ones too, down to three quarters of it.
template <typename Map>
size_t Sweep(Map& clients, QuotaClock::time_point now, size_t cap) {
  const auto idle = [](const auto& entry) { return entry.second->in_flight.load(std::memory_order_relaxed) == 0; };
  std::erase_if(clients, [&](const auto& entry) { return idle(entry) && entry.second->full_at <= now; });
  if (clients.size() >= cap) {
    const size_t target = cap * 3 / 4;
    for (auto it = clients.begin(); it != clients.end() && clients.size() > target;) {
      it = idle(*it) ? clients.erase(it) : std::next(it);
    }
  }
  return std::min(cap, std::max<size_t>(64, 2 * clients.size()));
}

}  // namespace

std::variant<QuotaTicket, QuotaRejection> ClientQuotas::Acquire(std::string_view client, std::string_view model) {
  client = client.substr(0, kMaxClientIdBytes);
  const QuotaConfig* config = config_.load(std::memory_order_acquire);
  const QuotaLimit& client_limit = config->ClientLimit(client);
  const QuotaLimit* model_limit = config->ModelLimit(client, model);
  if (client_limit.unlimited() && (model_limit == nullptr || model_limit->unlimited())) return QuotaTicket{};

  const QuotaClock::time_point now = now_();
  Shard& shard = (*shards_)[std::hash<std::string_view>{}(client) % kShards];
  std::unique_lock lock(shard.mu);
  auto it = shard.clients.find(client);
  if (it == shard.clients.end()) {
    const size_t cap = std::max<size_t>(1, config->max_tracked_clients() / kShards);
    if (shard.clients.size() >= std::min(shard.sweep_at, cap)) shard.sweep_at = Sweep(shard.clients, now, cap);
    it = shard.clients.emplace(std::string(client), std::make_shared<QuotaTicket::State>()).first;
  }
  QuotaTicket::State& state = *it->second;
  state.bucket.Advance(client_limit, now);
  ModelState* model_state = nullptr;
  if (model_limit != nullptr) {
    auto m = state.models.find(model);
    if (m == state.models.end()) m = state.models.try_emplace(std::string(model)).first;
    model_state = &m->second;
    model_state->bucket.Advance(*model_limit, now);
  }
  double wait = 0, token_wait = 0;
  std::string why =
      Refusal(client_limit, state.bucket, state.in_flight.load(), "the client's quota", &wait, &token_wait);
  if (why.empty() && model_state != nullptr) {
    why = Refusal(*model_limit, model_state->bucket, model_state->in_flight.load(),
                  "the client's quota for this model", &wait, &token_wait);
  }
  if (!why.empty()) {
    lock.unlock();
    CountRejection(*config, client, model);
    const auto retry = static_cast<uint32_t>(std::max(1.0, std::ceil(wait - 1e-9)));
    return QuotaRejection{.message = fmt::format("client over quota for model '{}': {}; retry after {} s", model,
                                                 why, retry),
                          .retry_after_s = retry,
                          .pause = QuotaPause(token_wait)};
  }
  QuotaTicket ticket;
  if (client_limit.rate) state.bucket.Take();
  state.full_at = std::max(state.full_at, state.bucket.FullAt(client_limit));
  state.in_flight.fetch_add(1, std::memory_order_relaxed);
  if (model_state != nullptr) {
    if (model_limit->rate) model_state->bucket.Take();
    state.full_at = std::max(state.full_at, model_state->bucket.FullAt(*model_limit));
    model_state->in_flight.fetch_add(1, std::memory_order_relaxed);
    ticket.model_in_flight_ = &model_state->in_flight;
  }
  ticket.state_ = it->second;
  return ticket;
}

void ClientQuotas::CountRejection(const QuotaConfig& config, std::string_view client, std::string_view model) {
  const std::string_view label = config.Named(client) ? client : kOtherClient;
  std::string key;
  key.reserve(label.size() + 1 + model.size());
  key.append(label).push_back('\0');
  key.append(model);
  std::lock_guard lock(rejected_mu_);
  ++rejected_[std::move(key)];
}

std::vector<ClientQuotas::RejectedCount> ClientQuotas::Rejected() const {
  std::lock_guard lock(rejected_mu_);
  std::vector<RejectedCount> out;
  out.reserve(rejected_.size());
  for (const auto& [key, count] : rejected_) {
    const size_t split = key.find('\0');
    out.push_back({key.substr(0, split), key.substr(split + 1), count});
  }
  return out;
}

size_t ClientQuotas::TrackedClients() const {
  size_t n = 0;
  for (Shard& shard : *shards_) {
    std::lock_guard lock(shard.mu);
    n += shard.clients.size();
  }
  return n;
}

}  // namespace ortserve::common
