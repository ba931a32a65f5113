// Checkpoints of a run: RunDirectory::checkpoint_dir(S) (checkpoints/step-<S>/) holds the adapter (PEFT layout), the AdamW moments
// and step count (optimizer.pt), the global torch RNG (rng.pt; each GPU's in rng_cuda.pt where CUDA is present), and state.json (step, policy version, dataset cursor, metrics
// position, RNG seed state, the resolved config, the trainer's adaptive entropy controller), with SHA256SUMS over all of it. Written into a
// temporary directory and renamed into place; the newest few are kept. Loading picks the newest
// checkpoint whose files all match SHA256SUMS and falls back to older ones with a warning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/records/run_dir.h"

namespace grpo::model { class CausalLMImpl; }
namespace grpo::grpo { class Optimizer; }

namespace grpo::run {

struct CheckpointState {
  int64_t step = 0;
  int64_t policy_version = 0;
  nlohmann::json data_cursor;     // rollout::DataCursor::to_json()
  int64_t next_group_id = 0;
  nlohmann::json config;          // the resolved TrainConfig at save time (retunes included)
  nlohmann::json trainer = nlohmann::json::object();  // GrpoTrainer::controller_state() ({} before it was kept)
  nlohmann::json to_json() const;
  static CheckpointState from_json(const nlohmann::json& j, const std::string& context);
};

// Saves checkpoints/step-<state.step>; keeps the newest `keep`. Returns the directory.
std::string save_checkpoint(RunDirectory& dir, const model::CausalLMImpl& model, const grpo::Optimizer& optimizer,
                            const CheckpointState& state, int64_t keep = 3);

struct LoadedCheckpoint {
  std::string dir;
  CheckpointState state;
  std::vector<std::string> skipped;  // newer checkpoints that were torn or corrupt, with why
};
// The newest intact checkpoint of `run_dir`, or nullopt if none.
std::optional<LoadedCheckpoint> find_latest_checkpoint(const std::string& run_dir);
// Loads the adapter and optimizer state of `ckpt` into the model/optimizer.
void restore_checkpoint(const LoadedCheckpoint& ckpt, model::CausalLMImpl& model, grpo::Optimizer& optimizer);

}  // namespace grpo::run
