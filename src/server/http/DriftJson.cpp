#include "server/http/DriftJson.h"

#include <algorithm>
#include <cstdlib>

#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

void MomentsJson(JsonWriter& w, const DriftMoments& m) {
  w.Key("count");
  w.Int(m.count);
  w.Key("mean");
  w.Float(m.mean);
  w.Key("variance");
  w.Float(m.Variance());
}

void CountsJson(JsonWriter& w, const std::vector<uint64_t>& counts) {
  w.StartArray();
  for (uint64_t c : counts) w.Int(c);
  w.EndArray();
}

void InputJson(JsonWriter& w, const DriftInputSummary& input, const DriftInputProfile* reference) {
  w.StartObject();
  w.Key("name");
  w.String(input.name);
  MomentsJson(w, input.moments);
  w.Key("histogram");
  CountsJson(w, input.counts);
  w.Key("reference");
  if (reference) {
    w.StartObject();
    MomentsJson(w, reference->moments);
    w.Key("edges");
    w.StartArray();
    for (double e : reference->edges) w.Float(e);
    w.EndArray();
    w.Key("histogram");
    CountsJson(w, reference->counts);
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("psi");
  if (input.psi) w.Float(*input.psi); else w.Null();
  w.EndObject();
}

void VersionJson(JsonWriter& w, const std::string& version, const DriftSummary& s) {
  w.StartObject();
  w.Key("version");
  w.String(version);
  w.Key("recording");
  w.Bool(s.recording);
  w.Key("baseline_requests");
  w.Int(s.baseline_requests);
  w.Key("requests");
  w.Int(s.requests);
  w.Key("observed_requests");
  w.Int(s.observed_requests);
  w.Key("sample_fraction");
  w.Float(s.sample_fraction);
  w.Key("inputs");
  w.StartArray();
  for (const auto& input : s.inputs) InputJson(w, input, s.reference ? s.reference->Find(input.name) : nullptr);
  w.EndArray();
  w.EndObject();
}

int64_t VersionNumber(const Model& m) {
  return std::strtoll(m.version().c_str(), nullptr, 10);
}

}  // namespace

std::string DriftJson(const std::string& model, const std::vector<std::shared_ptr<Model>>& models) {
  return ModelVersionsJson(model, [&](JsonWriter& w) {
    for (const auto& m : models) {
      if (m->drift()) VersionJson(w, m->version(), m->drift()->Snapshot());
    }
  });
}

Result<std::string> DriftProfileText(const std::vector<std::shared_ptr<Model>>& models) {
  const Model* newest = nullptr;
  for (const auto& m : models) {
    if (m->drift() && (!newest || VersionNumber(*m) > VersionNumber(*newest))) newest = m.get();
  }
  if (!newest) return InvalidArgument("no version has drift statistics");
  const DriftSummary s = newest->drift()->Snapshot();
  std::shared_ptr<const DriftProfile> profile = s.AsProfile();
  if (!profile) {
    return InvalidArgument("version " + newest->version() + " is still recording its reference (" +
                              std::to_string(s.requests) + " of " + std::to_string(s.baseline_requests) +
                              " requests)");
  }
  return WriteDriftProfile(*profile);
}

}  // namespace ortserve::http
