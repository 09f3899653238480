#include "server/http/ModelJson.h"

#include <google/protobuf/util/json_util.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <array>
#include <charconv>

#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

void WriteTensorMetadata(JsonWriter& w, const std::vector<common::TensorMetadata>& tensors) {
  w.StartArray();
  for (const common::TensorMetadata& t : tensors) {
    w.StartObject();
    w.Key("name");
    w.String(t.name);
    w.Key("datatype");
    w.String(t.datatype);
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int(d);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

// Writes {"<name>":{"count":..,"ns":..}, ...} members for parallel arrays of
// wire names and totals.
template <size_t N>
void WriteDurations(JsonWriter& w, const std::array<std::string_view, N>& names,
                    const std::array<common::DurationTotals, N>& totals) {
  for (size_t i = 0; i < N; ++i) {
    w.Key(names[i]);
    w.StartObject();
    w.Key("count");
    w.Int(totals[i].count);
    w.Key("ns");
    w.Int(totals[i].ns);
    w.EndObject();
  }
}

// Protobuf's JSON mapping writes (u)int64 as strings; turn those back into
// numbers, walking the JSON alongside the message descriptor.
void ConvertInt64Value(rapidjson::Value& v, FieldDescriptor::CppType type) {
  if (!v.IsString()) return;
  const char* s = v.GetString();
  const char* e = s + v.GetStringLength();
  if (type == FieldDescriptor::CPPTYPE_INT64) {
    int64_t n;
    if (auto r = std::from_chars(s, e, n); r.ec == std::errc() && r.ptr == e) v.SetInt64(n);
  } else {
    uint64_t n;
    if (auto r = std::from_chars(s, e, n); r.ec == std::errc() && r.ptr == e) v.SetUint64(n);
  }
}

bool IsInt64(const FieldDescriptor* f) {
  return f->cpp_type() == FieldDescriptor::CPPTYPE_INT64 || f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
}

void FixInt64(rapidjson::Value& obj, const Descriptor* desc, int depth) {
  if (!obj.IsObject() || depth > 64) return;
  for (auto& m : obj.GetObject()) {
    const FieldDescriptor* f = desc->FindFieldByName(std::string(m.name.GetString(), m.name.GetStringLength()));
    if (!f) continue;
    rapidjson::Value& v = m.value;
    if (f->is_map()) {
      const FieldDescriptor* value_field = f->message_type()->map_value();
      if (!v.IsObject()) continue;
      for (auto& entry : v.GetObject()) {
        if (value_field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
          FixInt64(entry.value, value_field->message_type(), depth + 1);
        else if (IsInt64(value_field))
          ConvertInt64Value(entry.value, value_field->cpp_type());
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated() && v.IsArray()) {
        for (auto& item : v.GetArray()) FixInt64(item, f->message_type(), depth + 1);
      } else {
        FixInt64(v, f->message_type(), depth + 1);
      }
    } else if (IsInt64(f)) {
      if (f->is_repeated() && v.IsArray()) {
        for (auto& item : v.GetArray()) ConvertInt64Value(item, f->cpp_type());
      } else {
        ConvertInt64Value(v, f->cpp_type());
      }
    }
  }
}

}  // namespace

std::string ServerMetadataJson(const common::ServerMetadata& metadata) {
  std::string s;
  JsonWriter w(&s);
  w.StartObject();
  w.Key("name");
  w.String(metadata.name);
  w.Key("version");
  w.String(metadata.version);
  w.Key("extensions");
  w.StartArray();
  for (const std::string& e : metadata.extensions) w.String(e);
  w.EndArray();
  w.EndObject();
  return s;
}

std::string ModelMetadataJson(const common::ModelMetadata& metadata) {
  std::string s;
  s.reserve(256);
  JsonWriter w(&s);
  w.StartObject();
  w.Key("name");
  w.String(metadata.name);
  w.Key("versions");
  w.StartArray();
  for (const std::string& v : metadata.versions) w.String(v);
  w.EndArray();
  w.Key("platform");
  w.String(metadata.platform);
  w.Key("inputs");
  WriteTensorMetadata(w, metadata.inputs);
  w.Key("outputs");
  WriteTensorMetadata(w, metadata.outputs);
  w.EndObject();
  return s;
}

Result<std::string> ModelConfigJson(const inference::ModelConfig& config) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string proto_json;
  auto st = google::protobuf::util::MessageToJsonString(config, &proto_json, options);
  if (!st.ok()) return Internal("cannot convert the config of '" + config.name() + "' to JSON: " + st.ToString());
  rapidjson::Document doc;
  doc.Parse(proto_json.data(), proto_json.size());
  if (doc.HasParseError()) return Internal("protobuf produced unparsable JSON for '" + config.name() + "'");
  FixInt64(doc, inference::ModelConfig::descriptor(), 0);
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buf);
  doc.Accept(writer);
  return std::string(buf.GetString(), buf.GetSize());
}

std::string ModelStatsJson(const std::vector<common::ModelStatisticsSnapshot>& models) {
  std::string s;
  s.reserve(512 * (models.size() + 1));
  JsonWriter w(&s);
  w.StartObject();
  w.Key("model_stats");
  w.StartArray();
  for (const common::ModelStatisticsSnapshot& model : models) {
    w.StartObject();
    w.Key("name");
    w.String(model.name);
    w.Key("version");
    w.String(model.version);
    w.Key("last_inference");
    w.Int(model.last_inference_ms);
    w.Key("inference_count");
    w.Int(model.inference_count);
    w.Key("execution_count");
    w.Int(model.execution_count);
    w.Key("inference_stats");
    w.StartObject();
    WriteDurations(w, common::kInferenceDurationNames, model.inference);
    w.EndObject();
    w.Key("batch_stats");
    w.StartArray();
    for (const common::BatchStatisticsSnapshot& batch : model.batches) {
      w.StartObject();
      w.Key("batch_size");
      w.Int(batch.batch_size);
      WriteDurations(w, common::kBatchDurationNames, batch.durations);
      w.EndObject();
    }
    w.EndArray();
    // No memory usage is reported (as gRPC's empty repeated field).
    w.Key("memory_usage");
    w.StartArray();
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return s;
}

std::string RepositoryIndexJson(const std::vector<ModelIndexEntry>& entries, bool ready_only) {
  std::string s;
  s.reserve(64 * (entries.size() + 1));
  JsonWriter w(&s);
  w.StartArray();
  for (const auto& e : entries) {
    if (ready_only && e.state != ModelState::kReady) continue;
    w.StartObject();
    w.Key("name");
    w.String(e.name);
    if (!e.version.empty()) {
      w.Key("version");
      w.String(e.version);
    }
    w.Key("state");
    w.String(ModelStateName(e.state));
    if (!e.reason.empty()) {
      w.Key("reason");
      w.String(e.reason);
    }
    w.EndObject();
  }
  w.EndArray();
  return s;
}

namespace {

void WindowJson(JsonWriter& w, const WindowFigures& f) {
  w.StartObject();
  w.Key("requests");
  w.Int(f.requests);
  w.Key("errors");
  w.Int(f.errors);
  w.Key("error_rate");
  w.Float(f.error_rate);
  w.Key("p95_ms");
  if (f.p95_ms) {
    w.Float(*f.p95_ms);
  } else {
    w.Null();
  }
  w.EndObject();
}

void StepJson(JsonWriter& w, const RolloutStepFigures& f) {
  w.StartObject();
  w.Key("step");
  w.Int(f.step + 1);
  w.Key("weight");
  w.Int(f.weight);
  w.Key("seconds");
  w.Float(f.seconds);
  w.Key("candidate");
  WindowJson(w, f.candidate);
  w.Key("stable");
  WindowJson(w, f.stable);
  if (!f.outcome.empty()) {
    w.Key("outcome");
    w.String(f.outcome);
  }
  w.EndObject();
}

}  // namespace

std::string RolloutJson(const RolloutStatus& s) {
  std::string out;
  JsonWriter w(&out);
  w.StartObject();
  w.Key("model");
  w.String(s.model);
  w.Key("state");
  w.String(s.state);
  w.Key("stable");
  if (s.active) w.String(std::to_string(s.stable)); else w.Null();
  w.Key("candidate");
  if (s.active) w.String(std::to_string(s.candidate)); else w.Null();
  w.Key("weight");
  w.Int(s.weight);
  w.Key("step");  // 1-based; steps.size() + 1 once promoted
  w.Int(s.step + 1);
  w.Key("steps");
  w.StartArray();
  for (int step : s.steps) w.Int(step);
  w.EndArray();
  w.Key("reason");
  w.String(s.reason);
  w.Key("steps_finished");
  w.StartArray();
  for (const auto& f : s.finished_steps) StepJson(w, f);
  w.EndArray();
  w.Key("current_step");
  if (s.current_step) StepJson(w, *s.current_step); else w.Null();
  w.Key("events");
  w.StartObject();
  for (size_t i = 0; i < kRolloutEventCount; ++i) {
    w.Key(RolloutEventName(static_cast<RolloutEvent>(i)));
    w.Int(s.events[i]);
  }
  w.EndObject();
  w.EndObject();
  return out;
}

}  // namespace ortserve::http
