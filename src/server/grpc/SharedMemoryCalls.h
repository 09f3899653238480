#pragma once
// The gRPC side of Triton's shared memory extension: the shared_memory_*
// parameters of a ModelInferRequest's tensors, and the six shared memory
// methods. System shared memory is server/common/SharedMemoryRegistry.h,
// shared with the HTTP front end; CUDA shared memory is answered as Triton
// built without GPU support answers it. Internal to src/server/grpc.
#include <optional>
#include <string_view>

#include <grpcpp/support/status.h>

#include "core/Status.h"
#include "grpc_service.pb.h"
#include "server/common/SharedMemoryParameters.h"

namespace ortserve::grpcfe {

class GrpcServiceCore;

using ParameterMap = google::protobuf::Map<std::string, inference::InferParameter>;

// The reference in a tensor's parameters (tritonclient sends the region as
// string_param, offset and byte size as int64_param; uint64_param is taken
// too); nullopt when it names no region. `kind` "input" or "output" and
// `name` name the tensor in errors; nothing is built for a tensor without
// parameters.
Result<std::optional<common::SharedMemoryRef>> SharedMemoryRefOf(const ParameterMap& parameters,
                                                                 std::string_view kind, const std::string& name);

// How many of the request's inputs name a region (they have no
// raw_input_contents entry).
int CountSharedMemoryInputs(const inference::ModelInferRequest& message);

grpc::Status SystemSharedMemoryStatus(GrpcServiceCore& core, const inference::SystemSharedMemoryStatusRequest& request,
                                      inference::SystemSharedMemoryStatusResponse* response);
grpc::Status SystemSharedMemoryRegister(GrpcServiceCore& core,
                                        const inference::SystemSharedMemoryRegisterRequest& request,
                                        inference::SystemSharedMemoryRegisterResponse* response);
grpc::Status SystemSharedMemoryUnregister(GrpcServiceCore& core,
                                          const inference::SystemSharedMemoryUnregisterRequest& request,
                                          inference::SystemSharedMemoryUnregisterResponse* response);
grpc::Status CudaSharedMemoryStatus(GrpcServiceCore& core, const inference::CudaSharedMemoryStatusRequest& request,
                                    inference::CudaSharedMemoryStatusResponse* response);
grpc::Status CudaSharedMemoryRegister(GrpcServiceCore& core, const inference::CudaSharedMemoryRegisterRequest& request,
                                      inference::CudaSharedMemoryRegisterResponse* response);
grpc::Status CudaSharedMemoryUnregister(GrpcServiceCore& core,
                                        const inference::CudaSharedMemoryUnregisterRequest& request,
                                        inference::CudaSharedMemoryUnregisterResponse* response);

}  // namespace ortserve::grpcfe
