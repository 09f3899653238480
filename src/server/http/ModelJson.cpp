#include "server/http/ModelJson.h"

#include <google/protobuf/util/json_util.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <charconv>

#include "core/DataType.h"
#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

std::string_view ConfigTypeToName(inference::DataType t) {
  auto dt = DataTypeFromConfigName(inference::DataType_Name(t));
  return dt ? DataTypeName(*dt) : std::string_view("INVALID");
}

template <typename Tensors>
void WriteTensorMetadata(JsonWriter& w, const Tensors& tensors, bool batched) {
  w.StartArray();
  for (const auto& t : tensors) {
    w.StartObject();
    w.Key("name");
    w.String(t.name());
    w.Key("datatype");
    w.String(ConfigTypeToName(t.data_type()));
    w.Key("shape");
    w.StartArray();
    if (batched) w.Int(-1);
    for (int64_t d : t.dims()) w.Int(d);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

void WriteDuration(JsonWriter& w, std::string_view key, const DurationStat& s) {
  w.Key(key);
  w.StartObject();
  w.Key("count");
  w.Int(s.count.load(std::memory_order_relaxed));
  w.Key("ns");
  w.Int(s.ns.load(std::memory_order_relaxed));
  w.EndObject();
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

std::string ServerMetadataJson(std::string_view version) {
  std::string s;
  JsonWriter w(&s);
  w.StartObject();
  w.Key("name");
  w.String("ortserve");
  w.Key("version");
  w.String(version);
  w.Key("extensions");
  w.StartArray();
  // Only what is implemented: binary tensors, .../config, the statistics
  // endpoints, the timeout/priority request parameters, and the repository
  // index (no load/unload).
  for (const char* e : {"binary_tensor_data", "model_configuration", "statistics", "schedule_policy",
                        "model_repository"})
    w.String(e);
  w.EndArray();
  w.EndObject();
  return s;
}

std::string ModelMetadataJson(const Model& model, const std::vector<std::string>& versions) {
  const inference::ModelConfig& config = model.config();
  std::string s;
  s.reserve(256);
  JsonWriter w(&s);
  w.StartObject();
  w.Key("name");
  w.String(model.name());
  w.Key("versions");
  w.StartArray();
  for (const auto& v : versions) w.String(v);
  w.EndArray();
  w.Key("platform");
  w.String(config.platform().empty() ? std::string_view("onnxruntime_onnx") : std::string_view(config.platform()));
  const bool batched = config.max_batch_size() > 0;
  w.Key("inputs");
  WriteTensorMetadata(w, config.input(), batched);
  w.Key("outputs");
  WriteTensorMetadata(w, config.output(), batched);
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

std::string ModelStatsJson(const std::vector<std::shared_ptr<Model>>& models) {
  std::string s;
  s.reserve(512 * (models.size() + 1));
  JsonWriter w(&s);
  w.StartObject();
  w.Key("model_stats");
  w.StartArray();
  for (const auto& model : models) {
    ModelStatistics& st = model->stats();
    w.StartObject();
    w.Key("name");
    w.String(model->name());
    w.Key("version");
    w.String(model->version());
    w.Key("last_inference");
    w.Int(st.last_inference_ms.load(std::memory_order_relaxed));
    w.Key("inference_count");
    w.Int(st.inference_count.load(std::memory_order_relaxed));
    w.Key("execution_count");
    w.Int(st.execution_count.load(std::memory_order_relaxed));
    w.Key("inference_stats");
    w.StartObject();
    WriteDuration(w, "success", st.success);
    WriteDuration(w, "fail", st.fail);
    WriteDuration(w, "queue", st.queue);
    WriteDuration(w, "compute_input", st.compute_input);
    WriteDuration(w, "compute_infer", st.compute_infer);
    WriteDuration(w, "compute_output", st.compute_output);
    WriteDuration(w, "cache_hit", st.cache_hit);
    WriteDuration(w, "cache_miss", st.cache_miss);
    w.EndObject();
    w.Key("batch_stats");
    w.StartArray();
    for (size_t b = 1; b <= st.MaxTrackedBatchSize(); ++b) {
      const BatchStat& bs = st.BatchStatAt(b);
      if (bs.compute_infer.count.load(std::memory_order_relaxed) == 0) continue;
      w.StartObject();
      w.Key("batch_size");
      w.Int(b);
      WriteDuration(w, "compute_input", bs.compute_input);
      WriteDuration(w, "compute_infer", bs.compute_infer);
      WriteDuration(w, "compute_output", bs.compute_output);
      w.EndObject();
    }
    w.EndArray();
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

}  // namespace ortserve::http
