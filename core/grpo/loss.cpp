#include "core/grpo/loss.h"

#include <torch/torch.h>

#include "core/common/error.h"

namespace grpo::grpo {

LossType parse_loss_type(const std::string& s, const std::string& context) { return kLossTypes.parse(s, context); }

const char* to_string(LossType t) { return kLossTypes.name(t); }

namespace {
double masked_mean(const torch::Tensor& x, const torch::Tensor& m) {
  double n = m.sum().item<double>();
  return n > 0 ? (x * m).sum().item<double>() / n : 0.0;
}
}  // namespace

LossOutput grpo_loss(const LossInputs& in, const LossConfig& cfg) {
  const std::string ctx = "grpo_loss";
  check(in.logp.dim() == 2 && in.logp.sizes() == in.old_logp.sizes() && in.logp.sizes() == in.mask.sizes(),
        ctx, "logp, old_logp and mask must all be (B, T)");
  check(in.advantages.dim() == 1 && in.advantages.size(0) == in.logp.size(0), ctx, "advantages must be (B)");
  const bool use_ref = cfg.beta != 0.0;
  check(!use_ref || (in.ref_logp.defined() && in.ref_logp.sizes() == in.logp.sizes()), ctx,
        "beta > 0 needs ref_logp of shape (B, T)");
  const int64_t B = in.logp.size(0);
  const int64_t GA = std::max<int64_t>(1, cfg.gradient_accumulation_steps);

  auto mask = in.mask.to(in.logp.scalar_type());
  auto A = in.advantages.to(in.logp.scalar_type()).unsqueeze(1);  // (B, 1)
  auto log_ratio = in.logp - in.old_logp.detach();                 // (B, T)
  auto ratio = torch::exp(log_ratio);                              // (B, T)
  auto clipped = torch::clamp(ratio, 1.0 - cfg.epsilon_low, 1.0 + cfg.epsilon_high);
  auto per_token = -torch::min(ratio * A, clipped * A);            // (B, T)
  torch::Tensor kl_ref;
  if (use_ref) {
    auto d = in.ref_logp.detach() - in.logp;                       // (B, T)
    kl_ref = torch::exp(d) - d - 1.0;
    per_token = per_token + cfg.beta * kl_ref;
  }

  torch::Tensor loss;
  auto masked = per_token * mask;
  switch (cfg.type) {
    case LossType::GRPO:
      loss = (masked.sum(1) / mask.sum(1).clamp_min(1.0)).mean() / GA;
      break;
    case LossType::BNPO:
      loss = masked.sum() / mask.sum().clamp_min(1.0) / GA;
      break;
    case LossType::DrGRPO:
      check(cfg.max_completion_length > 0, ctx, "dr_grpo needs max_completion_length > 0");
      loss = masked.sum() / static_cast<double>(B * cfg.max_completion_length) / GA;
      break;
    case LossType::DAPO: {
      double n = in.num_items_in_batch > 0 ? in.num_items_in_batch : mask.sum().item<double>() * GA;
      loss = masked.sum() / std::max(1.0, n);
      break;
    }
  }

  LossOutput out;
  out.loss = loss;
  torch::NoGradGuard no_grad;
  auto r = ratio.detach();
  auto lr = log_ratio.detach();
  auto low = ((r < 1.0 - cfg.epsilon_low) & (A < 0)).to(mask.scalar_type());
  auto high = ((r > 1.0 + cfg.epsilon_high) & (A > 0)).to(mask.scalar_type());
  auto region = ((low + high) > 0).to(mask.scalar_type());
  auto tokens = mask.sum(1);  // (B)
  auto has = tokens > 0;
  auto per_seq_low = (low * mask).sum(1) / tokens.clamp_min(1.0);
  auto per_seq_high = (high * mask).sum(1) / tokens.clamp_min(1.0);
  out.metrics["ratio"] = masked_mean(r, mask);
  // Extremes over trained tokens: a fresh sample's ratio must be 1 everywhere, not just on average.
  auto trained = mask > 0;
  out.metrics["ratio_max"] = trained.any().item<bool>() ? r.masked_select(trained).max().item<double>() : 1.0;
  out.metrics["ratio_min"] = trained.any().item<bool>() ? r.masked_select(trained).min().item<double>() : 1.0;
  // "kl": the k3 estimator between the behaviour policy and the current one (AsyncGRPO meaning).
  out.metrics["kl"] = masked_mean(r - 1.0 - lr, mask);
  if (use_ref) out.metrics["kl_ref"] = masked_mean(kl_ref.detach(), mask);
  out.metrics["clip_ratio/low_mean"] = masked_mean(low, mask);
  out.metrics["clip_ratio/high_mean"] = masked_mean(high, mask);
  out.metrics["clip_ratio/region_mean"] = masked_mean(region, mask);
  out.metrics["clip_ratio/low_min"] =
      has.any().item<bool>() ? per_seq_low.masked_select(has).min().item<double>() : 0.0;
  out.metrics["clip_ratio/high_max"] =
      has.any().item<bool>() ? per_seq_high.masked_select(has).max().item<double>() : 0.0;
  out.metrics["policy_loss"] = loss.detach().item<double>();
  return out;
}

}  // namespace grpo::grpo
