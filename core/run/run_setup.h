// RunSetup: what a GRPO loop builds from its config before its first step, built one way for both
// loops: the asynchronous Engine and the synchronous SyncTrainer (`grpo train --sync`). SFT
// (core/run/sft.h) trains no GRPO policy but reads its examples through load_examples too.
// docs/ARCHITECTURE.md, "The threads of a run", says who owns each part once the run starts.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/grpo/config.h"
#include "core/grpo/trainer.h"
#include "core/records/run_dir.h"
#include "core/rollout/dataset_sampler.h"
#include "core/rollout/dataset_source.h"
#include "core/rollout/reward.h"
#include "core/run/policy.h"

namespace grpo::run {

struct RunSetup {
  grpo::SharedConfig config;                      // the run's one config (retunes replace the pointer)
  Policy policy;                                  // base model, tokenizer, the LoRA adapter trained
  std::unique_ptr<grpo::GrpoTrainer> trainer;     // holds the policy's model and the optimizer
  rollout::DatasetSplit data;                     // train and eval examples
  std::unique_ptr<rollout::DatasetStream> stream; // the train examples in the run's seeded order
  rollout::RewardSet rewards;                     // reward_funcs with reward_weights
};

// Builds a run's parts in this order: the policy (load_policy), the context check
// (check_fits_context), the init adapter on a fresh start (seed_from_init_adapter: it may change
// cfg's LoRA shape to the adapter's), torch's seed, the trainer,
// the examples (load_examples; none is an error), their stream, the rewards. A resumed run passes
// fresh_start = false: its adapter comes from the checkpoint instead. The config, as the init
// adapter left it, becomes RunSetup::config, the object the trainer shares.
RunSetup prepare_run(grpo::TrainConfig cfg, bool fresh_start);

// The run folder's config.json: cfg as trained, its output_dir, and the Hub snapshots it read
// (model_revision from the policy's snapshot, dataset_revision from the dataset's), so that the
// run can be reproduced from the folder alone.
void write_resolved_config(const RunDirectory& dir, const grpo::TrainConfig& cfg, const Policy& policy);

// A completion (after at least one prompt token) must fit the model's context: a retune of
// max_completion_length to 2^20 made every KV cache allocation fail, and the run spun on failed
// generations. Unknown context (max_position_embeddings 0) is not checked. `source` names the
// config ("config", "retune") in the error.
void check_fits_context(const Policy& policy, const grpo::TrainConfig& cfg, const std::string& source);

// The training and eval examples of a config: train_file (+ eval_file or a held-out split), or
// the built-in arithmetic task.
rollout::DatasetSplit load_examples(const grpo::TrainConfig& cfg);
// The config's dataset_name/config/revision/columns with `split`.
rollout::DatasetRef dataset_ref(const grpo::TrainConfig& cfg, const std::string& split);

// eval/accuracy of a run: rollout::greedy_accuracy of `policy` on up to `limit` examples (0 =
// all) with the config's sampling limits, scored by the run's accuracy function; NaN when none
// could be scored. `rewards_mutex`, when given, is held while scoring (the engine's scorer shares
// the RewardSet).
double eval_accuracy(Policy& policy, rollout::RewardSet& rewards, const std::vector<rollout::Example>& examples,
                     const grpo::TrainConfig& cfg, int64_t limit, std::mutex* rewards_mutex = nullptr);

}  // namespace grpo::run
