#include "core/run/step_assembler.h"

#include <cmath>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/grpo/metrics.h"

namespace grpo::run {
namespace {

// Mean and unbiased std of the non-NaN values (NaN mean and 0 std when there are none).
std::pair<double, double> mean_std(const std::vector<double>& v) {
  double s = 0, n = 0;
  for (double x : v)
    if (!std::isnan(x)) { s += x; n += 1; }
  const double m = n > 0 ? s / n : NAN;
  double var = 0;
  for (double x : v)
    if (!std::isnan(x)) var += (x - m) * (x - m);
  return {m, n > 1 ? std::sqrt(var / (n - 1)) : 0.0};
}

}  // namespace

void score_groups(const Policy& policy, rollout::RewardSet& rewards, grpo::ScaleRewards scale,
                  const std::vector<ScoredGroup*>& groups, std::mutex* rewards_mutex,
                  grpo::MultiObjective aggregation) {
  if (groups.empty()) return;
  const int64_t G = static_cast<int64_t>(groups.front()->result.completions.size());
  std::vector<rollout::RewardInput> inputs;
  for (ScoredGroup* g : groups) {
    check(static_cast<int64_t>(g->result.completions.size()) == G && G > 0, "scorer",
          "group " + std::to_string(g->group_id) + " has " + std::to_string(g->result.completions.size()) +
              " completions, expected " + std::to_string(G));
    g->texts.clear();
    for (const auto& c : g->result.completions) {
      g->texts.push_back(policy.decode(c.token_ids));
      inputs.push_back({g->example.prompt_text, g->texts.back(), g->example.answer, g->example.metadata, c.token_ids});
    }
  }
  rollout::RewardScores scores;
  {
    std::unique_lock<std::mutex> lock;
    if (rewards_mutex) lock = std::unique_lock<std::mutex>(*rewards_mutex);  // weights may be retuned
    scores = rewards.score(inputs);
  }
  const int64_t B = static_cast<int64_t>(inputs.size());
  const int64_t F = static_cast<int64_t>(scores.per_function.size());
  auto per_func = torch::empty({F, B}, torch::kFloat64);
  auto pf = per_func.accessor<double, 2>();
  for (int64_t f = 0; f < F; ++f)
    for (int64_t b = 0; b < B; ++b) pf[f][b] = scores.per_function[f][b];
  auto adv = grpo::compute_advantages(per_func, scores.weights, G, scale, 1e-4, aggregation);
  auto r = adv.rewards.accessor<double, 1>();
  auto a = adv.advantages.accessor<double, 1>();
  for (size_t k = 0; k < groups.size(); ++k) {
    ScoredGroup& g = *groups[k];
    const int64_t off = static_cast<int64_t>(k) * G;
    g.rewards.assign(G, 0.0);
    g.advantages.assign(G, 0.0);
    g.per_function.assign(F, std::vector<double>(G, 0.0));
    for (int64_t b = 0; b < G; ++b) {
      g.rewards[b] = r[off + b];
      g.advantages[b] = a[off + b];
      for (int64_t f = 0; f < F; ++f) g.per_function[f][b] = scores.per_function[f][off + b];
    }
    g.function_names = scores.names;
    g.reward_std = adv.group_std[static_cast<int64_t>(k)].item<double>();
  }
}

AssembledStep assemble_step(int64_t step, const std::vector<const ScoredGroup*>& groups, size_t max_traces) {
  AssembledStep out;
  grpo::MetricsWindow window;
  std::map<std::string, std::vector<double>> per_function;  // rewards/<f>: every trained sample's value
  for (const ScoredGroup* g : groups) {
    const auto& cs = g->result.completions;
    for (size_t i = 0; i < cs.size(); ++i) {
      if (out.traces.size() < max_traces) {
        out.traces.push_back({step, g->result.policy_version, g->group_id, g->example.prompt_text, g->texts[i],
                              g->example.answer.value_or(""), cs[i].finish_reason, g->rewards[i], g->advantages[i]});
        for (size_t f = 0; f < g->function_names.size(); ++f)
          out.traces.back().rewards.emplace_back(g->function_names[f], g->per_function[f][i]);
      }
      window.add("sample/unscorable_frac", std::isnan(g->rewards[i]) ? 1.0 : 0.0);
      if (cs[i].token_ids.empty()) continue;  // nothing to train on
      out.samples.push_back({g->prompt_ids, cs[i].token_ids, cs[i].logprobs, g->advantages[i],
                             cs[i].finish_reason == "length", g->result.policy_version});
      window.add("reward", g->rewards[i]);
      for (size_t f = 0; f < g->function_names.size(); ++f)
        per_function[g->function_names[f]].push_back(g->per_function[f][i]);
    }
    window.add("reward_std", g->reward_std);
    window.add("frac_reward_zero_std", g->reward_std < 1e-12 ? 1.0 : 0.0);
  }
  out.metrics = window.reduce();
  for (const auto& [name, values] : per_function) {
    const auto [mean, sd] = mean_std(values);
    out.metrics["rewards/" + name + "/mean"] = mean;
    out.metrics["rewards/" + name + "/std"] = sd;
  }
  return out;
}

}  // namespace grpo::run
