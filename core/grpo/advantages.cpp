#include "core/grpo/advantages.h"

#include <torch/torch.h>

#include "core/common/error.h"

namespace grpo::grpo {

ScaleRewards parse_scale_rewards(const std::string& s, const std::string& context) {
  return kScaleRewards.parse(s, context);
}

const char* to_string(ScaleRewards s) { return kScaleRewards.name(s); }

namespace {
// Mean and unbiased std over the non-NaN entries of each row of x (R, G).
std::pair<torch::Tensor, torch::Tensor> masked_mean_std(const torch::Tensor& x) {
  auto scored = ~torch::isnan(x);                                    // (R, G)
  auto n = scored.sum(1).to(torch::kFloat64);                        // (R)
  auto filled = torch::where(scored, x, torch::zeros_like(x));
  auto mean = filled.sum(1) / n.clamp_min(1);                        // (R)
  auto dev = torch::where(scored, x - mean.unsqueeze(1), torch::zeros_like(x));
  auto var = (dev * dev).sum(1) / (n - 1).clamp_min(1);              // (R)
  var = torch::where(n >= 2, var, torch::zeros_like(var));
  return {mean, var.sqrt()};
}
}  // namespace

Advantages compute_advantages(const torch::Tensor& per_func, const std::vector<double>& weights,
                              int64_t group_size, ScaleRewards scale, double eps, MultiObjective aggregation) {
  check(per_func.dim() == 2, "compute_advantages", "per-function rewards must be (F, B)");
  const int64_t F = per_func.size(0), B = per_func.size(1);
  check(group_size > 0 && B % group_size == 0, "compute_advantages",
        "batch of " + std::to_string(B) + " samples is not a multiple of num_generations " +
            std::to_string(group_size));
  check(weights.empty() || static_cast<int64_t>(weights.size()) == F, "compute_advantages",
        std::to_string(weights.size()) + " reward_weights for " + std::to_string(F) + " reward functions");

  auto r = per_func.to(torch::kFloat64);  // (F, B)
  auto w = weights.empty() ? torch::ones({F}, torch::kFloat64)
                           : torch::tensor(weights, torch::kFloat64);
  auto isnan = torch::isnan(r);
  auto weighted = torch::where(isnan, torch::zeros_like(r), r * w.unsqueeze(1));  // nansum
  auto all_none = isnan.all(0);                                                    // (B)
  Advantages out;
  out.rewards = torch::where(all_none, torch::full({B}, NAN, torch::kFloat64), weighted.sum(0));
  out.unscorable = all_none.sum().item<int64_t>();

  auto grouped = out.rewards.view({B / group_size, group_size});  // (n_groups, G)
  auto [gmean, gstd] = masked_mean_std(grouped);
  out.group_mean = gmean;
  out.group_std = gstd;
  out.frac_reward_zero_std = (gstd < 1e-12).to(torch::kFloat64).mean().item<double>();

  auto centered = grouped - gmean.unsqueeze(1);  // (n_groups, G)
  if (scale == ScaleRewards::Group) {
    centered = centered / (gstd.unsqueeze(1) + eps);
  } else if (scale == ScaleRewards::Batch) {
    auto [bmean, bstd] = masked_mean_std(out.rewards.view({1, B}));
    centered = centered / (bstd + eps);
  }
  auto adv = centered.reshape({B});
  if (aggregation == MultiObjective::NormalizeThenSum) {
    // GDPO (TRL's normalize_then_sum): each function z-scored within its group over the samples it
    // scored, the weighted nansum, then z-scored over the batch (unbiased std, as torch.std).
    auto per = r.view({F, B / group_size, group_size});                 // (F, n_groups, G)
    auto [fmean, fstd] = masked_mean_std(per.reshape({F * (B / group_size), group_size}));
    auto z = (per - fmean.view({F, B / group_size, 1})) / (fstd.view({F, B / group_size, 1}) + eps);
    auto zsum = torch::where(torch::isnan(z), torch::zeros_like(z), z * w.view({F, 1, 1})).sum(0).reshape({B});
    const double bmean = zsum.mean().item<double>();
    const double bstd = B > 1 ? zsum.std().item<double>() : 0.0;
    adv = (zsum - bmean) / (bstd + eps);
    adv = torch::where(all_none, torch::zeros_like(adv), adv);
  }
  out.advantages = torch::where(torch::isnan(adv), torch::zeros_like(adv), adv);
  return out;
}

}  // namespace grpo::grpo
