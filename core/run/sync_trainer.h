// SyncTrainer: the synchronous GRPO loop (generate -> score -> advantages -> train, repeat) over
// one run directory. The asynchronous engine reuses its parts (Policy, RewardSet, GrpoTrainer,
// RunDirectory); `grpo train --sync` keeps this loop for comparison.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/grpo/config.h"
#include "core/grpo/trainer.h"
#include "core/rollout/dataset_sampler.h"
#include "core/rollout/dataset_source.h"
#include "core/rollout/reward.h"
#include "core/run/engine_types.h"
#include "core/run/policy.h"
#include "core/run/run_dir.h"

namespace grpo::run {

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

class SyncTrainer {
public:
  SyncTrainer(grpo::TrainConfig cfg, const std::string& run_dir);
  ~SyncTrainer();

  // Trains until max_steps or until *stop becomes true; publishes adapters every
  // weight_sync_steps and the final one; returns the final adapter's directory.
  std::string run(const std::function<void(const StepReport&)>& on_step = {},
                  const std::atomic<bool>* stop = nullptr);
  // eval_accuracy on up to `limit` eval examples (0 = all).
  double evaluate(int64_t limit = 0);

  Policy& policy() { return policy_; }
  RunDirectory& run_directory() { return dir_; }

private:
  StepReport one_step(int64_t step);

  grpo::TrainConfig cfg_;
  RunDirectory dir_;
  Policy policy_;
  rollout::DatasetSplit data_;
  std::unique_ptr<rollout::DatasetStream> stream_;
  rollout::RewardSet rewards_;
  std::unique_ptr<rollout::Sampler> sampler_;
  std::unique_ptr<grpo::GrpoTrainer> trainer_;
  int64_t version_ = 0;
};

}  // namespace grpo::run
