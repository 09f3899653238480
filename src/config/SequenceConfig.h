#pragma once
// Triton's sequence_batching as a config states it: translated into what the
// sequence batcher takes (scheduler/SequenceBatcherOptions.h), checked
// against the model file, and the names of the tensors the server feeds --
// control inputs and implicit state -- which are inputs (and outputs) of the
// model but not of the config's input/output lists, and which a client may
// not send. Every failure names the field, in Triton's words where it has
// them. Pure functions.
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/Status.h"
#include "model_config.pb.h"
#include "runtime/ModelSignature.h"
#include "scheduler/SequenceBatcherOptions.h"

namespace ortserve {

// parameters { key: "sequence_restart" value { string_value: "allow" } }:
// what a START for a sequence that is still running does -- "allow" (default,
// Triton's: the old sequence ends there and a new one starts in its slot) or
// "reject" (kInvalidArgument naming the sequence).
inline constexpr const char* kSequenceRestartParameter = "sequence_restart";
// Triton's max_sequence_idle_microseconds when the config leaves it 0.
inline constexpr uint64_t kDefaultSequenceIdleUs = 1'000'000;
// A bound on max_candidate_sequences, so that a typo cannot allocate slots
// by the billion.
inline constexpr int kMaxSequenceSlotsPerInstance = 65536;
// initial_state data_file is read from <model>/initial_state/, as Triton.
inline constexpr const char* kInitialStateFolder = "initial_state";

// Whether `name` is an input the server feeds (a control input or a state
// input of sequence_batching, or a batch input's target).
bool IsServerFedInput(const inference::ModelConfig& config, const std::string& name);
// Whether `name` is a state output of sequence_batching.
bool IsStateOutput(const inference::ModelConfig& config, const std::string& name);
// "the sequence batcher's control input CONTROL_SEQUENCE_START", "the
// implicit state input fed from output 'X'", "a batch input ...": what a message calls a
// server-fed input (`name` must be one).
std::string DescribeServerFedInput(const inference::ModelConfig& config, const std::string& name);

// sequence_batching -> SequenceBatcherOptions (the compute policy is the
// loader's). Reads initial_state data files from
// <model_dir>/initial_state/. kUnavailable naming the field otherwise.
Result<SequenceBatcherOptions> MakeSequenceBatcherOptions(const inference::ModelConfig& config,
                                                          const std::string& version,
                                                          const std::filesystem::path& model_dir);

// The control and state tensors against the model: each control input and
// state input is an input of the model and not in the config's input list,
// each state output an output of the model, with the configured data types
// and the shapes the server feeds ([batch, 1] for a control, [batch] + dims
// for a state; without the batch dim when max_batch_size is 0).
Status CheckSequenceTensors(const inference::ModelConfig& config, const ModelSignature& signature);

}  // namespace ortserve
