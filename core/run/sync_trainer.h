// SyncTrainer: the synchronous GRPO loop (generate -> score -> advantages -> train, repeat) over
// one run directory, built from the same RunSetup as the asynchronous engine (core/run/run_setup.h);
// `grpo train --sync` keeps this loop for comparison.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/records/engine_types.h"
#include "core/run/run_setup.h"
#include "core/run/step_assembler.h"

namespace grpo::run {

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

  Policy& policy() { return run_.policy; }
  RunDirectory& run_directory() { return dir_; }

private:
  StepReport one_step(int64_t step);

  const grpo::TrainConfig& cfg() const { return *run_.config; }

  RunDirectory dir_;
  RunSetup run_;  // the run's one config is run_.config
  std::unique_ptr<rollout::Sampler> sampler_;
  int64_t version_ = 0;
  std::optional<AssembledStep> batch_;  // the batch num_iterations steps share, and their count
  int64_t passes_ = 0;
};

}  // namespace grpo::run
