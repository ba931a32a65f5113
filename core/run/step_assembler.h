// One GRPO step's data, the same for the async engine and the synchronous loop: groups of
// completions are scored (rewards, then group-relative advantages: compute_advantages), and the
// scored groups of a step become the trainer's samples, the step's reward statistics (TRL's
// names) and a few traces for the run's samples file.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/grpo/advantages.h"
#include "core/grpo/trainer.h"
#include "core/records/engine_types.h"
#include "core/rollout/dataset.h"
#include "core/rollout/reward.h"
#include "core/run/policy.h"
#include "core/run/rollout_source.h"

namespace grpo::run {

// One prompt's group of completions, scored: what the scorer hands the trainer.
struct ScoredGroup {
  int64_t group_id = 0;
  rollout::Example example;
  std::vector<int64_t> prompt_ids;
  RolloutResult result;                           // the completions and the version that sampled them
  std::vector<std::string> texts;                 // [G] decoded completions
  std::vector<double> rewards, advantages;        // [G] weighted reward (NaN: unscorable), advantage
  std::vector<std::vector<double>> per_function;  // [F][G], NaN where a function returned None
  std::vector<std::string> function_names;        // [F]
  double reward_std = 0;  // unbiased std of the group's scored rewards (compute_advantages' group_std)
};

// Decodes and scores `groups` together: every reward function, then advantages over these
// groups (each group its own baseline; "batch" scaling spans the groups given). The engine's
// scorer passes one group at a time, as AsyncGRPO's rollout worker does; the synchronous loop
// passes the whole step. `rewards_mutex`, when given, is held while the reward functions run.
void score_groups(const Policy& policy, rollout::RewardSet& rewards, grpo::ScaleRewards scale,
                  const std::vector<ScoredGroup*>& groups, std::mutex* rewards_mutex = nullptr,
                  grpo::MultiObjective aggregation = grpo::MultiObjective::SumThenNormalize);

struct AssembledStep {
  std::vector<grpo::TrainSample> samples;  // completions with tokens, with their advantages
  // reward, reward_std (mean of the groups' std), frac_reward_zero_std, rewards/<f>/mean and
  // rewards/<f>/std, sample/unscorable_frac (every reward None: trained with advantage 0).
  std::map<std::string, double> metrics;
  std::vector<SampleRecord> traces;        // the step's first `max_traces` completions
};
AssembledStep assemble_step(int64_t step, const std::vector<const ScoredGroup*>& groups, size_t max_traces = 8);

}  // namespace grpo::run
