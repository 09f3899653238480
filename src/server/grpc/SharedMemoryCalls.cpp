#include "server/grpc/SharedMemoryCalls.h"

#include <string>

#include "server/grpc/GrpcInferCodec.h"
#include "server/grpc/GrpcServiceCore.h"

namespace ortserve::grpcfe {
namespace {

using Kind = common::WireParameter::Kind;

common::WireParameter WireOf(const inference::InferParameter& p) {
  common::WireParameter w;
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kStringParam:
      w.kind = Kind::kString;
      w.string_value = p.string_param();
      break;
    case inference::InferParameter::kInt64Param:
      w.kind = Kind::kSigned;
      w.signed_value = p.int64_param();
      break;
    case inference::InferParameter::kUint64Param:
      w.kind = Kind::kUnsigned;
      w.unsigned_value = p.uint64_param();
      break;
    default: w.kind = Kind::kOther;
  }
  return w;
}

grpc::Status Disabled() {
  return ToGrpcStatus(Unsupported(std::string(common::kClientShmDisabledMessage)));
}

}  // namespace

Result<std::optional<common::SharedMemoryRef>> SharedMemoryRefOf(const ParameterMap& parameters,
                                                                 std::string_view kind, const std::string& name) {
  if (parameters.empty()) return std::optional<common::SharedMemoryRef>();
  const std::string tensor = std::string(kind) + " '" + name + "'";
  return common::ParseSharedMemoryRef(tensor, [&parameters](std::string_view key) {
    const auto it = parameters.find(std::string(key));
    return it == parameters.end() ? common::WireParameter{} : WireOf(it->second);
  });
}

int CountSharedMemoryInputs(const inference::ModelInferRequest& message) {
  int count = 0;
  const std::string region(common::kShmRegionParameter);
  for (const auto& input : message.inputs()) {
    if (!input.parameters().empty() && input.parameters().contains(region)) ++count;
  }
  return count;
}

grpc::Status SystemSharedMemoryStatus(GrpcServiceCore& core, const inference::SystemSharedMemoryStatusRequest& request,
                                      inference::SystemSharedMemoryStatusResponse* response) {
  auto regions = core.shared_memory().Describe(request.name());
  if (!regions.ok()) return ToGrpcStatus(regions.status());
  for (const common::SharedMemoryRegionStatus& s : *regions) {
    auto& region = (*response->mutable_regions())[s.name];
    region.set_name(s.name);
    region.set_key(s.key);
    region.set_offset(s.offset);
    region.set_byte_size(s.byte_size);
  }
  return grpc::Status::OK;
}

grpc::Status SystemSharedMemoryRegister(GrpcServiceCore& core,
                                        const inference::SystemSharedMemoryRegisterRequest& request,
                                        inference::SystemSharedMemoryRegisterResponse*) {
  return ToGrpcStatus(
      core.shared_memory().Register(request.name(), request.key(), request.offset(), request.byte_size()));
}

grpc::Status SystemSharedMemoryUnregister(GrpcServiceCore& core,
                                          const inference::SystemSharedMemoryUnregisterRequest& request,
                                          inference::SystemSharedMemoryUnregisterResponse*) {
  return ToGrpcStatus(core.shared_memory().Unregister(request.name()));
}

grpc::Status CudaSharedMemoryStatus(GrpcServiceCore&, const inference::CudaSharedMemoryStatusRequest& request,
                                    inference::CudaSharedMemoryStatusResponse*) {
  if (request.name().empty()) return grpc::Status::OK;
  return ToGrpcStatus(NotFound("Unable to find cuda shared memory region: '" + request.name() + "'"));
}

grpc::Status CudaSharedMemoryRegister(GrpcServiceCore&, const inference::CudaSharedMemoryRegisterRequest& request,
                                      inference::CudaSharedMemoryRegisterResponse*) {
  return ToGrpcStatus(InvalidArgument(common::CudaRegisterRefusal(request.name())));
}

grpc::Status CudaSharedMemoryUnregister(GrpcServiceCore& core, const inference::CudaSharedMemoryUnregisterRequest&,
                                        inference::CudaSharedMemoryUnregisterResponse*) {
  if (!core.shared_memory().options().allow_client_shm) return Disabled();
  return grpc::Status::OK;
}

}  // namespace ortserve::grpcfe
