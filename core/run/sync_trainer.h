// SyncTrainer: the synchronous GRPO loop (generate -> score -> advantages -> train, repeat) over
// one run directory. The asynchronous engine reuses its parts (Policy, RewardSet, GrpoTrainer,
// RunDirectory); `grpo train --sync` keeps this loop for comparison.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/grpo/config.h"
#include "core/grpo/trainer.h"
#include "core/rollout/dataset_sampler.h"
#include "core/rollout/reward.h"
#include "core/run/policy.h"
#include "core/run/run_dir.h"

namespace grpo::run {

struct StepReport {
  int64_t step = 0;
  int64_t max_steps = 0;
  double elapsed_s = 0;
  std::map<std::string, double> metrics;
};

// The training and eval examples of a config: train_file (+ eval_file or a held-out split), or
// the built-in arithmetic task.
rollout::DatasetSplit load_examples(const grpo::TrainConfig& cfg);

class SyncTrainer {
public:
  SyncTrainer(grpo::TrainConfig cfg, const std::string& run_dir);
  ~SyncTrainer();

  // Trains until max_steps or until *stop becomes true; publishes adapters every
  // weight_sync_steps and the final one; returns the final adapter's directory.
  std::string run(const std::function<void(const StepReport&)>& on_step = {},
                  const std::atomic<bool>* stop = nullptr);
  // Greedy accuracy (mean of the first reward function) on up to `limit` eval examples.
  double evaluate(int64_t limit = 0);

  Policy& policy() { return policy_; }
  RunDirectory& run_directory() { return dir_; }

private:
  std::map<std::string, double> one_step(int64_t step);

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
