#include "server/http/SharedMemoryJson.h"

#include <string>
#include <utility>

namespace ortserve::http {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;
using Kind = common::WireParameter::Kind;

common::ParameterLookup JsonLookup(object params) {
  return [params](std::string_view key) {
    common::WireParameter p;
    element e;
    if (params.at_key(key).get(e) != simdjson::SUCCESS) return p;
    switch (e.type()) {
      case element_type::STRING:
        p.kind = Kind::kString;
        p.string_value = e.get_string().value_unsafe();
        break;
      case element_type::INT64:
        p.kind = Kind::kSigned;
        p.signed_value = e.get_int64().value_unsafe();
        break;
      case element_type::UINT64:
        p.kind = Kind::kUnsigned;
        p.unsigned_value = e.get_uint64().value_unsafe();
        break;
      default: p.kind = Kind::kOther;
    }
    return p;
  };
}

std::string Named(std::string_view kind, std::string_view name) {
  std::string s(kind);
  s.append(" '").append(name.substr(0, 128)).append("'");
  return s;
}

// True when `params` names any shared memory parameter. Checked first, so
// that a request without shared memory (binary tensors carry parameters on
// every input) builds no name and no lookup for it.
bool MentionsSharedMemory(object params) {
  for (std::string_view key : {common::kShmRegionParameter, common::kShmOffsetParameter,
                               common::kShmByteSizeParameter}) {
    element e;
    if (params.at_key(key).get(e) == simdjson::SUCCESS) return true;
  }
  return false;
}

}  // namespace

Result<bool> DecodeInputSharedMemory(std::optional<element> parameters, std::string_view name, size_t index,
                                     bool has_data, bool has_binary, common::SharedMemoryRefs* refs) {
  object params;
  if (!parameters || parameters->get_object().get(params) != simdjson::SUCCESS) return false;
  if (!MentionsSharedMemory(params)) return false;
  auto ref = common::ParseSharedMemoryRef(Named("input", name), JsonLookup(params));
  if (!ref.ok()) return ref.status();
  if (!ref->has_value()) return false;
  if (has_data || has_binary) {
    return InvalidArgument(
        "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
        "'shared_memory_region' in 'parameters'. But set" +
        std::string(has_data ? " 'data'" : "") + (has_binary ? " 'binary_data_size'" : "") +
        " 'shared_memory_region' (input '" + std::string(name.substr(0, 128)) + "')");
  }
  refs->inputs.emplace_back(index, std::move(**ref));
  return true;
}

Status DecodeOutputSharedMemory(object parameters, std::string_view name, size_t index,
                                common::SharedMemoryRefs* refs) {
  if (!MentionsSharedMemory(parameters)) return Status::Ok();
  auto ref = common::ParseSharedMemoryRef(Named("output", name), JsonLookup(parameters));
  if (!ref.ok()) return ref.status();
  if (!ref->has_value()) return Status::Ok();
  bool binary = false;
  if (element bd; parameters.at_key("binary_data").get(bd) == simdjson::SUCCESS && bd.get_bool().get(binary) == simdjson::SUCCESS && binary) {
    return InvalidArgument("Output can't set both 'shared_memory_region' and 'binary_data' (output '" +
                           std::string(name.substr(0, 128)) + "')");
  }
  refs->outputs.emplace_back(index, std::move(**ref));
  return Status::Ok();
}

}  // namespace ortserve::http
