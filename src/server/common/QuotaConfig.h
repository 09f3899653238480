#pragma once
// The per-client quota file (--client-quota-config), JSON:
//
//   {
//     "default": {"rate": 50, "burst": 10, "max_in_flight": 8},
//     "models":  {"densenet": {"rate": 20, "max_in_flight": 4}},
//     "clients": {
//       "tenant-a": {"rate": 200, "burst": 50, "max_in_flight": 32,
//                    "models": {"densenet": {"rate": 100}}}
//     },
//     "max_tracked_clients": 10000
//   }
//
// A limit has up to three fields: "rate" (requests per second, > 0),
// "burst" (the bucket's size, an integer >= 1; default: the rate rounded up)
// and "max_in_flight" (an integer >= 1). A field left out is unlimited.
//
// A client named under "clients" gets that entry as its client-wide limit
// (replacing "default" as a whole); every other client gets "default"
// (absent: unlimited). A model's limit for a client is the client's own
// "models" entry for it, else the top-level "models" entry, else none. Both
// apply: a request needs a token (and an in-flight slot) from its client's
// client-wide limit and from its client's limit for the model. Every client
// has its own buckets; unnamed clients do not share one.
//
// "max_tracked_clients" bounds the clients whose state is kept (default
// 10000); see ClientQuotas.h. Unknown keys and bad values are errors naming
// the key. Immutable after Parse(); safe to share across threads.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/Status.h"

namespace ortserve::common {

struct QuotaLimit {
  std::optional<double> rate;  // requests per second
  double burst = 1;            // meaningful only with a rate
  std::optional<uint32_t> max_in_flight;
  bool unlimited() const { return !rate && !max_in_flight; }
};

struct TransparentHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, TransparentHash, std::equal_to<>>;

class QuotaConfig {
 public:
  static constexpr size_t kDefaultMaxTrackedClients = 10000;

  // `text`: the file's content; `source`: its path, for messages.
  static Result<QuotaConfig> Parse(std::string_view text, std::string_view source);
  static Result<QuotaConfig> Load(const std::string& path);

  // True when `client` has its own entry (it is then its own metrics label).
  bool Named(std::string_view client) const { return clients_.find(client) != clients_.end(); }
  const QuotaLimit& ClientLimit(std::string_view client) const;
  // Null when the model has no limit for this client.
  const QuotaLimit* ModelLimit(std::string_view client, std::string_view model) const;
  size_t max_tracked_clients() const { return max_tracked_clients_; }

 private:
  struct ClientEntry {
    QuotaLimit limit;
    StringMap<QuotaLimit> models;
  };
  QuotaLimit default_;
  StringMap<QuotaLimit> models_;
  StringMap<ClientEntry> clients_;
  size_t max_tracked_clients_ = kDefaultMaxTrackedClients;
};

}  // namespace ortserve::common
