#pragma once
// The inputs of a reference check read from a folder (parameter
// reference_samples, docs/model-config.md "Reference check"): one NumPy
// .npy file per model input, named <input>.npy, holding the tensor exactly as
// the model takes it (for a batching model the batch dimension first; all the
// rows run as one batch). Types: little-endian bool, int8..int64,
// uint8..uint64, float16/32/64, C order.
#include <filesystem>
#include <string>
#include <vector>

#include "core/Status.h"
#include "core/Tensor.h"
#include "model_config.pb.h"

namespace ortserve {

// A tensor from the bytes of an .npy file; kInvalidArgument saying what is
// wrong (magic, header, type, Fortran order, size).
Result<Tensor> ParseNpy(const std::string& name, const std::string& bytes);

// <folder>/<input>.npy for every input of `config` (data types checked
// against it). kInvalidArgument naming the file for a missing or bad one.
Result<std::vector<Tensor>> ReadReferenceSamples(const inference::ModelConfig& config,
                                                 const std::filesystem::path& folder);

}  // namespace ortserve
