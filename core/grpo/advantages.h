// GRPO advantages: weighted reward sums with None/NaN semantics, group-relative baselines and
// reward scaling (docs/formulas.md, "Rewards" and "Group advantages"). Pure functions on tensors.
#pragma once

#include <string>
#include <vector>

#include <torch/types.h>

#include "core/grpo/choices.h"

namespace grpo::grpo {

// ScaleRewards and its names: core/grpo/choices.h (kScaleRewards).
ScaleRewards parse_scale_rewards(const std::string& s, const std::string& context);
const char* to_string(ScaleRewards s);

struct Advantages {
  torch::Tensor rewards;     // (B) weighted nansum over reward functions; NaN = unscorable
  torch::Tensor advantages;  // (B) 0 for unscorable samples
  torch::Tensor group_mean;  // (n_groups) mean reward over the scored samples of each group
  torch::Tensor group_std;   // (n_groups) unbiased std over the scored samples (0 if < 2 scored)
  double frac_reward_zero_std = 0.0;  // fraction of groups whose rewards are all equal
  int64_t unscorable = 0;             // samples every reward function returned None for
};

// per_func: (F, B) rewards, NaN where a function returned None; weights: F values (empty = all 1).
// B must be a multiple of group_size; samples of one group are contiguous.
// A_i = (r_i - mean_g(r)) / (std + eps) for Group/Batch scaling, r_i - mean_g(r) for None,
// with mean and std over scored samples only (TRL GRPOTrainer: unbiased std, eps = 1e-4).
// With NormalizeThenSum (GDPO) each function is z-scored within its group first, the weighted
// sum is taken, and that is z-scored over the batch; `scale` does not apply (TRL's rule).
// `rewards` stay the plain weighted sums either way (the reward metrics).
Advantages compute_advantages(const torch::Tensor& per_func, const std::vector<double>& weights,
                              int64_t group_size, ScaleRewards scale, double eps = 1e-4,
                              MultiObjective aggregation = MultiObjective::SumThenNormalize);

}  // namespace grpo::grpo
