#pragma once
// The shared memory endpoints of the HTTP front end (Triton's extension):
//   GET  /v2/systemsharedmemory[/region/{name}]/status
//   POST /v2/systemsharedmemory/region/{name}/register  {"key","offset","byte_size"}
//   POST /v2/systemsharedmemory[/region/{name}]/unregister
// and the same under /v2/cudasharedmemory, which ortserve answers as Triton
// built without GPU support does: status lists no region, register is
// refused (400), unregister has nothing to do.
#include <string>
#include <string_view>
#include <vector>

#include "server/common/SharedMemoryRegistry.h"
#include "server/http/HttpService.h"

namespace ortserve::http {

// `path` is SplitPath's output, whose second segment is "systemsharedmemory"
// or "cudasharedmemory"; `body` the request body (register only).
HttpResponse HandleSharedMemoryRequest(std::string_view method, const std::vector<std::string>& path,
                                       std::string_view body, common::SharedMemoryRegistry& registry);

}  // namespace ortserve::http
