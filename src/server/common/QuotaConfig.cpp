#include "server/common/QuotaConfig.h"

#include <simdjson.h>

#include <cmath>
#include <fstream>
#include <sstream>

namespace ortserve::common {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

Status Bad(std::string_view source, std::string_view where, std::string_view what) {
  return InvalidArgument("client quota config " + std::string(source) + ": " + std::string(where) + ": " +
                         std::string(what));
}

Result<QuotaLimit> ParseLimit(element value, std::string_view source, const std::string& where,
                              StringMap<QuotaLimit>* models) {
  object obj;
  if (value.get_object().get(obj) != simdjson::SUCCESS) return Bad(source, where, "must be an object");
  QuotaLimit limit;
  std::optional<double> burst;
  for (auto [key, field] : obj) {
    const std::string name = where + "." + std::string(key);
    double number = 0;
    const bool numeric = field.get_double().get(number) == simdjson::SUCCESS;
    if (key == "models" && models != nullptr) {
      object per_model;
      if (field.get_object().get(per_model) != simdjson::SUCCESS) return Bad(source, name, "must be an object");
      for (auto [model, model_limit] : per_model) {
        auto parsed = ParseLimit(model_limit, source, name + "." + std::string(model), nullptr);
        if (!parsed.ok()) return parsed.status();
        (*models)[std::string(model)] = parsed.value();
      }
    } else if (key == "rate") {
      if (!numeric || !(number > 0) || !std::isfinite(number)) return Bad(source, name, "must be a number > 0");
      limit.rate = number;
    } else if (key == "burst" || key == "max_in_flight") {
      if (!numeric || number < 1 || number != std::floor(number) || number > 1e9)
        return Bad(source, name, "must be an integer >= 1");
      if (key == "burst") burst = number;
      else limit.max_in_flight = static_cast<uint32_t>(number);
    } else {
      return Bad(source, name, "unknown key (expected rate, burst, max_in_flight" +
                                   std::string(models ? ", models)" : ")"));
    }
  }
  if (burst && !limit.rate) return Bad(source, where + ".burst", "needs a rate");
  if (limit.rate) limit.burst = burst ? *burst : std::max(1.0, std::ceil(*limit.rate));
  return limit;
}

Result<StringMap<QuotaLimit>> ParseModels(element value, std::string_view source, const std::string& where) {
  object obj;
  if (value.get_object().get(obj) != simdjson::SUCCESS) return Bad(source, where, "must be an object");
  StringMap<QuotaLimit> out;
  for (auto [model, limit] : obj) {
    auto parsed = ParseLimit(limit, source, where + "." + std::string(model), nullptr);
    if (!parsed.ok()) return parsed.status();
    out[std::string(model)] = parsed.value();
  }
  return out;
}

}  // namespace

Result<QuotaConfig> QuotaConfig::Parse(std::string_view text, std::string_view source) {
  simdjson::dom::parser parser;
  object root;
  if (auto error = parser.parse(text.data(), text.size(), true).get_object().get(root); error != simdjson::SUCCESS)
    return Bad(source, "the document", std::string("is not a JSON object (") + simdjson::error_message(error) + ")");
  QuotaConfig config;
  for (auto [key, value] : root) {
    const std::string name(key);
    if (key == "default") {
      auto limit = ParseLimit(value, source, name, nullptr);
      if (!limit.ok()) return limit.status();
      config.default_ = limit.value();
    } else if (key == "models") {
      auto models = ParseModels(value, source, name);
      if (!models.ok()) return models.status();
      config.models_ = std::move(models).value();
    } else if (key == "clients") {
      object clients;
      if (value.get_object().get(clients) != simdjson::SUCCESS) return Bad(source, name, "must be an object");
      for (auto [client, entry_value] : clients) {
        ClientEntry entry;
        auto limit = ParseLimit(entry_value, source, name + "." + std::string(client), &entry.models);
        if (!limit.ok()) return limit.status();
        entry.limit = limit.value();
        config.clients_[std::string(client)] = std::move(entry);
      }
    } else if (key == "max_tracked_clients") {
      uint64_t n = 0;
      if (value.get_uint64().get(n) != simdjson::SUCCESS || n < 1 || n > 100'000'000)
        return Bad(source, name, "must be an integer from 1 to 100000000");
      config.max_tracked_clients_ = n;
    } else {
      return Bad(source, name, "unknown key (expected default, models, clients, max_tracked_clients)");
    }
  }
  return config;
}

Result<QuotaConfig> QuotaConfig::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("client quota config " + path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

const QuotaLimit& QuotaConfig::ClientLimit(std::string_view client) const {
  auto it = clients_.find(client);
  return it == clients_.end() ? default_ : it->second.limit;
}

const QuotaLimit* QuotaConfig::ModelLimit(std::string_view client, std::string_view model) const {
  if (auto c = clients_.find(client); c != clients_.end()) {
    if (auto m = c->second.models.find(model); m != c->second.models.end()) return &m->second;
  }
  auto m = models_.find(model);
  return m == models_.end() ? nullptr : &m->second;
}

}  // namespace ortserve::common
