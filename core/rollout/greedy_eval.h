// Greedy evaluation: the accuracy a run reports as eval/accuracy, used by the async engine, the
// synchronous loop and SFT alike. Each example is generated once at temperature 0 and scored by
// the run's accuracy function (RewardSet::accuracy_function: accuracy, accuracy_reward, ...), or
// by the built-in `accuracy` when the run has none, never by a format or length score.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/rollout/dataset.h"
#include "core/rollout/reward.h"
#include "core/rollout/sampler.h"

namespace grpo::rollout {

struct GreedyEval {
  std::function<std::vector<int64_t>(const Example&)> encode;          // prompt ids of an example
  std::function<std::string(const std::vector<int64_t>&)> decode;      // completion text
  SamplingParams params;              // max_tokens, stop ids and strings; temperature is set to 0
  RewardSet* rewards = nullptr;       // its accuracy function scores, else the built-in one
  std::mutex* rewards_mutex = nullptr;  // held while scoring (a scorer thread shares the set)
  size_t chunk = 64;                  // prompts generated together
};

// The mean accuracy over the first `limit` examples (0 = all) that the function could score;
// NaN when there are no examples or none could be scored.
double greedy_accuracy(Sampler& sampler, const std::vector<Example>& examples, size_t limit, const GreedyEval& how);

}  // namespace grpo::rollout
