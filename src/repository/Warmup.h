#pragma once
// Warm-up samples run on every instance before a model reports READY, so the
// first real request does not pay for ORT's lazy initialisation and allocator
// growth.
#include <filesystem>
#include <string>
#include <vector>

#include "core/Status.h"
#include "core/Tensor.h"
#include "model_config.pb.h"
#include "scheduler/SequenceBatcherOptions.h"

namespace ortserve {

struct WarmupSample {
  std::string name;
  int count = 1;
  // Model-level tensors: full (batched) shapes, config reshape applied.
  std::vector<Tensor> inputs;
  // Default warm-up whose data is a guess: a dynamic non-batch dim set to 1,
  // or BYTES elements as empty strings (a model may parse its strings, as
  // Triton's simple_string does). A failure may then be the guess's fault, not
  // the model's, so the repository only warns.
  bool best_effort = false;
};

// The config's model_warmup entries (zero_data, random_data, or
// input_data_file read from <model_dir>/warmup/; a path escaping that folder
// is rejected). Without model_warmup: for a batching model one sample per
// batch size in {1, preferred sizes, max_batch_size}; otherwise one sample.
// Dynamic non-batch dims become 1; BYTES elements are empty strings; both
// make the sample best_effort. With shape buckets (ShapeBuckets.h) each
// sample runs once per bucket it fits, its padded inputs padded to it.
// A sequence model (`sequence` not null) also gets the inputs the server
// feeds: a model_warmup entry may name them itself; those it leaves out, and
// every default sample, get START and READY true, END false, CORRID 0 and the
// initial state, one row per batch row; its default samples are best_effort.
// A ragged model's samples run as a batch of one request (RaggedConfig.h):
// ragged inputs flattened, batch inputs made.
Result<std::vector<WarmupSample>> BuildWarmupSamples(const inference::ModelConfig& config,
                                                     const std::filesystem::path& model_dir,
                                                     const SequencePolicy* sequence = nullptr);

}  // namespace ortserve
