#include "core/rollout/greedy_eval.h"

#include <algorithm>
#include <cmath>

#include "core/rollout/reward_builtin.h"

namespace grpo::rollout {

double greedy_accuracy(Sampler& sampler, const std::vector<Example>& examples, size_t limit, const GreedyEval& how) {
  const size_t n = limit > 0 ? std::min(examples.size(), limit) : examples.size();
  SamplingParams params = how.params;
  params.temperature = 0.0;
  const size_t chunk = std::max<size_t>(1, how.chunk);
  double correct = 0, scored = 0;
  for (size_t s = 0; s < n; s += chunk) {
    const size_t e = std::min(n, s + chunk);
    std::vector<std::vector<int64_t>> prompts;
    for (size_t i = s; i < e; ++i) prompts.push_back(how.encode(examples[i]));
    auto out = sampler.generate(prompts, 1, params);
    std::vector<RewardInput> inputs;
    for (size_t i = s; i < e; ++i) {
      const auto& ids = out[i - s][0].token_ids;
      inputs.push_back({examples[i].prompt_text, how.decode(ids), examples[i].answer, examples[i].metadata, ids});
    }
    std::unique_lock<std::mutex> lock;
    if (how.rewards_mutex) lock = std::unique_lock<std::mutex>(*how.rewards_mutex);
    AccuracyReward builtin;
    RewardFunction* acc = how.rewards ? how.rewards->accuracy_function() : nullptr;
    for (const auto& v : (acc ? acc : &builtin)->score(inputs))
      if (v && !std::isnan(*v)) { correct += *v; scored += 1; }
  }
  return scored > 0 ? correct / scored : NAN;
}

}  // namespace grpo::rollout
