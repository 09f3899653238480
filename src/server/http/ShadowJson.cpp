#include "server/http/ShadowJson.h"

#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

void OutputJson(JsonWriter& w, const ShadowOutputSummary& o) {
  w.StartObject();
  w.Key("name");
  w.String(o.name);
  w.Key("mismatches");
  w.Int(o.mismatches);
  w.Key("max_abs_difference");
  w.Float(o.max_abs_difference);
  w.Key("max_rel_difference");
  w.Float(o.max_rel_difference);
  w.Key("top1_agreement");
  if (o.has_classes && o.top1_rows > 0) {
    w.Float(static_cast<double>(o.top1_agreeing) / static_cast<double>(o.top1_rows));
  } else {
    w.Null();
  }
  w.Key("top1_rows");
  w.Int(o.top1_rows);
  w.Key("last_mismatch");
  w.String(o.last_mismatch);
  w.EndObject();
}

void VersionJson(JsonWriter& w, const ShadowSummary& s) {
  w.StartObject();
  w.Key("version");
  w.String(s.version);
  w.Key("shadow_version");
  w.String(std::to_string(s.shadow_version));
  w.Key("fraction");
  w.Float(s.fraction);
  w.Key("tolerance");
  w.Float(s.tolerance);
  w.Key("compared");
  w.Int(s.compared);
  w.Key("dropped");
  w.Int(s.dropped);
  w.Key("failed");
  w.Int(s.failed);
  w.Key("last_failure");
  w.String(s.last_failure);
  w.Key("outputs");
  w.StartArray();
  for (const ShadowOutputSummary& o : s.outputs) OutputJson(w, o);
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string ShadowJson(const std::string& model, const std::vector<std::shared_ptr<Model>>& models) {
  return ModelVersionsJson(model, [&](JsonWriter& w) {
    for (const auto& m : models) {
      if (const ShadowComparison* shadow = m->shadow()) VersionJson(w, shadow->Snapshot());
    }
  });
}

}  // namespace ortserve::http
