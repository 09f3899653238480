#pragma once
// Per-client rate and concurrency limits (--client-quota-config), checked at
// admission, before a request enters a model's queue (QuotaConfig.h has the
// file's format and which limit applies to whom).
//
// Rate: a token bucket per client (and per client and model where a model
// limit applies) that holds up to `burst` tokens and refills at `rate` per
// second; a request takes one token from each bucket that applies, or none
// when any is empty. Concurrency: a request holds one in-flight slot of its
// client (and of its client for the model) from admission until its answer
// is in the front end's hands (the QuotaTicket's life).
//
// A refusal carries Retry-After: the seconds until every empty bucket has a
// token again, rounded up (at least 1); 1 when a concurrency limit refused.
//
// Memory: the state of clients with nothing in flight whose buckets are full
// again is dropped (a new state is identical), and at most
// max_tracked_clients states are kept: past that, idle clients' states are
// dropped first-found, which hands those clients a full bucket again (no
// worse than a client inventing a new id, which the header lets it do).
// States of clients with requests in flight are never dropped, so their
// number is bounded by the requests in flight. A client id is cut to its
// first kMaxClientIdBytes bytes.
//
// Lock-light: 16 shards by the id's hash, each a mutex over a hash map; an
// admission reads the limits in force without a lock or a shared write, then
// does one lookup and O(1) arithmetic under one shard's mutex; a release is
// two atomic decrements. Sweeps run when a shard has doubled since the last
// one (amortised O(1) per new client). Thread-safe.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/common/QuotaConfig.h"

namespace ortserve::common {

using QuotaClock = std::chrono::steady_clock;

// One token bucket; the limit is passed in, so a reload applies at once.
class TokenBucket {
 public:
  // Refills up to `now` (a new bucket starts full; tokens above a lowered
  // burst are dropped).
  void Advance(const QuotaLimit& limit, QuotaClock::time_point now);
  bool HasToken() const { return tokens_ >= 1; }
  void Take() { tokens_ -= 1; }
  double tokens() const { return tokens_; }
  // Seconds until one token is there, from the last Advance().
  double SecondsUntilToken(const QuotaLimit& limit) const;
  // When the bucket is full again, from the last Advance().
  QuotaClock::time_point FullAt(const QuotaLimit& limit) const;

 private:
  double tokens_ = 0;
  QuotaClock::time_point last_{};
  bool started_ = false;
};

struct QuotaRejection {
  std::string message;
  uint32_t retry_after_s = 1;  // whole seconds, at least 1 (the Retry-After header)
  // How long the front end holds the refused client's connection (HTTP: its
  // next request is not read) or call (gRPC ModelInfer: the refusal is sent)
  // before going on: until the client's bucket holds a token again (at least
  // kMinQuotaPause, at most kMaxQuotaPause), stretched by a random 0-100%:
  // a client's many connections, refused together while they wait for the
  // same token, would otherwise all come back at once, a burst every token
  // that delays whatever else arrives in it. A closed-loop client that
  // ignores Retry-After thus gets at most 1/kMinQuotaPause refusals a second
  // per connection or call in flight instead of as many as the server can
  // write, which leaves the cores, the server's and the clients' alike, to
  // the clients within their quotas. The bounds keep it short against a long
  // Retry-After: the pause paces refusals, it refuses nothing more.
  std::chrono::microseconds pause{kMinQuotaPause};

  static constexpr std::chrono::microseconds kMinQuotaPause{10'000};
  static constexpr std::chrono::microseconds kMaxQuotaPause{100'000};
};

class ClientQuotas;

// What a front end needs for quotas: the limits (null: no quotas) and the
// header naming the client (lowercase; empty, or absent from a request: the
// peer's IP address is the client's id).
struct QuotaSettings {
  std::shared_ptr<ClientQuotas> quotas;
  std::string client_id_header;
};

// An admitted request's in-flight slots; released when destroyed. Move-only.
class QuotaTicket {
 public:
  QuotaTicket() = default;
  QuotaTicket(QuotaTicket&&) noexcept = default;
  QuotaTicket& operator=(QuotaTicket&& other) noexcept;
  ~QuotaTicket() { Release(); }
  explicit operator bool() const { return state_ != nullptr; }
  // Gives the slots back now (idempotent).
  void Release();

 private:
  friend class ClientQuotas;
  struct State;
  std::shared_ptr<State> state_;
  std::atomic<uint32_t>* model_in_flight_ = nullptr;
};

class ClientQuotas {
 public:
  static constexpr size_t kMaxClientIdBytes = 256;
  static constexpr size_t kShards = 16;
  // What ortserve_quota_rejected_total reports for clients with no entry.
  static constexpr std::string_view kOtherClient = "other";
  using NowFn = std::function<QuotaClock::time_point()>;

  explicit ClientQuotas(QuotaConfig config, NowFn now = QuotaClock::now);
  ~ClientQuotas();

  // Later admissions use `config`; buckets and in-flight counts carry over.
  void Reload(QuotaConfig config);

  // Admits one request of `client` for `model`, or says why not.
  std::variant<QuotaTicket, QuotaRejection> Acquire(std::string_view client, std::string_view model);

  struct RejectedCount {
    std::string client;  // a named client, or kOtherClient
    std::string model;
    uint64_t count = 0;
  };
  std::vector<RejectedCount> Rejected() const;
  // Client states currently kept (for tests and sizing).
  size_t TrackedClients() const;

 private:
  struct Shard;
  void CountRejection(const QuotaConfig& config, std::string_view client, std::string_view model);

  NowFn now_;
  // The limits in force: a plain atomic pointer, so that an admission reads
  // it without writing a shared cache line (a std::atomic<shared_ptr> load
  // takes a reference: two contended atomic writes per request). Every
  // config loaded stays in `configs_` until the ClientQuotas goes: a reload
  // (an operator's SIGHUP) keeps the old file's few hundred bytes.
  std::atomic<const QuotaConfig*> config_;
  std::mutex configs_mu_;
  std::vector<std::unique_ptr<const QuotaConfig>> configs_;
  std::unique_ptr<std::array<Shard, kShards>> shards_;
  mutable std::mutex rejected_mu_;
  std::map<std::string, uint64_t> rejected_;  // "<client label>\0<model>"
};

}  // namespace ortserve::common
