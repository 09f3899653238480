#include "server/http/SharedMemoryRoutes.h"

#include <simdjson.h>

#include <cstdint>
#include <optional>

#include "server/http/JsonWriter.h"

namespace ortserve::http {
namespace {

// The body of a register request is a small object; anything larger is refused.
constexpr size_t kMaxRegisterBody = 4096;

struct RegisterRequest {
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

Result<uint64_t> UnsignedField(simdjson::dom::object obj, std::string_view field) {
  simdjson::dom::element e;
  uint64_t v = 0;
  if (obj.at_key(field).get(e) != simdjson::SUCCESS) {
    return InvalidArgument("Shared memory register request has no '" + std::string(field) + "' field");
  }
  if (e.type() == simdjson::dom::element_type::DOUBLE || e.get_uint64().get(v) != simdjson::SUCCESS) {
    return InvalidArgument("Shared memory register request: '" + std::string(field) +
                           "' must be a non-negative integer");
  }
  return v;
}

Result<RegisterRequest> ParseRegisterBody(std::string_view body) {
  if (body.size() > kMaxRegisterBody) {
    return InvalidArgument("Shared memory register request body is over " + std::to_string(kMaxRegisterBody) +
                           " bytes");
  }
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (parser.parse(body.data(), body.size(), true).get_object().get(obj) != simdjson::SUCCESS) {
    return InvalidArgument("Shared memory register request body must be a JSON object");
  }
  RegisterRequest r;
  simdjson::dom::element key;
  std::string_view key_text;
  if (obj.at_key("key").get(key) != simdjson::SUCCESS) {
    return InvalidArgument("Shared memory register request has no 'key' field");
  }
  if (key.get_string().get(key_text) != simdjson::SUCCESS) {
    return InvalidArgument("Shared memory register request: 'key' must be a string");
  }
  r.key = key_text;
  if (simdjson::dom::element e; obj.at_key("offset").get(e) == simdjson::SUCCESS) {
    auto offset = UnsignedField(obj, "offset");
    if (!offset.ok()) return offset.status();
    r.offset = *offset;
  }
  auto byte_size = UnsignedField(obj, "byte_size");
  if (!byte_size.ok()) return byte_size.status();
  r.byte_size = *byte_size;
  return r;
}

HttpResponse JsonOk(std::string body) {
  HttpResponse r;
  r.body = std::move(body);
  return r;
}

HttpResponse Respond(const Status& status) {
  if (!status.ok()) return HttpService::ErrorResponse(status);
  return JsonOk("");
}

HttpResponse SystemStatus(const std::string& region, const common::SharedMemoryRegistry& registry) {
  auto regions = registry.Describe(region);
  if (!regions.ok()) return HttpService::ErrorResponse(regions.status());
  std::string body;
  JsonWriter w(&body);
  w.StartArray();
  for (const common::SharedMemoryRegionStatus& s : *regions) {
    w.StartObject();
    w.Key("name");
    w.String(s.name);
    w.Key("key");
    w.String(s.key);
    w.Key("offset");
    w.Int(s.offset);
    w.Key("byte_size");
    w.Int(s.byte_size);
    w.EndObject();
  }
  w.EndArray();
  return JsonOk(std::move(body));
}

HttpResponse System(const std::string& region, const std::string& action, std::string_view body,
                    common::SharedMemoryRegistry& registry) {
  if (action == "status") return SystemStatus(region, registry);
  if (action == "unregister") return Respond(registry.Unregister(region));
  if (!registry.options().allow_client_shm) {
    return HttpService::ErrorResponse(Unsupported(std::string(common::kClientShmDisabledMessage)));
  }
  if (region.empty()) {
    return HttpService::ErrorResponse(400, "'region name' is necessary to register system shared memory region");
  }
  auto request = ParseRegisterBody(body);
  if (!request.ok()) return HttpService::ErrorResponse(request.status());
  return Respond(registry.Register(region, request->key, request->offset, request->byte_size));
}

// What Triton built without GPU support answers.
HttpResponse Cuda(const std::string& region, const std::string& action, const common::SharedMemoryRegistry& registry) {
  if (action == "status") {
    if (region.empty()) return JsonOk("[]");
    return HttpService::ErrorResponse(404, "Unable to find cuda shared memory region: '" + region + "'");
  }
  if (!registry.options().allow_client_shm) {
    return HttpService::ErrorResponse(Unsupported(std::string(common::kClientShmDisabledMessage)));
  }
  if (action == "unregister") return JsonOk("");
  if (region.empty()) {
    return HttpService::ErrorResponse(400, "'region name' is necessary to register cuda shared memory region");
  }
  return HttpService::ErrorResponse(400, common::CudaRegisterRefusal(region));
}

}  // namespace

HttpResponse HandleSharedMemoryRequest(std::string_view method, const std::vector<std::string>& path,
                                       std::string_view body, common::SharedMemoryRegistry& registry) {
  const size_t n = path.size();
  std::string region;
  std::string action;
  if (n == 3) {
    action = path[2];
  } else if (n == 5 && path[2] == "region") {
    region = path[3];
    action = path[4];
  }
  if (action != "status" && action != "register" && action != "unregister") {
    std::string target;
    for (const std::string& segment : path) target.append("/").append(segment.substr(0, 128));
    return HttpService::ErrorResponse(404, "no such endpoint: " + target);
  }
  const std::string_view allowed = action == "status" ? "GET" : "POST";
  if (method != allowed) {
    return HttpService::ErrorResponse(405, "method " + std::string(method) + " is not allowed on " + action +
                                               " (use " + std::string(allowed) + ")");
  }
  if (path[1] == "cudasharedmemory") return Cuda(region, action, registry);
  return System(region, action, body, registry);
}

}  // namespace ortserve::http
