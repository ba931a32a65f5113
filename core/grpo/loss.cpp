#include "core/grpo/loss.h"

#include <cmath>

#include <torch/torch.h>

#include "core/common/error.h"

namespace grpo::grpo {

LossType parse_loss_type(const std::string& s, const std::string& context) { return kLossTypes.parse(s, context); }

const char* to_string(LossType t) { return kLossTypes.name(t); }

const char* to_string(ImportanceSamplingLevel l) { return kImportanceSamplingLevels.name(l); }

namespace {
double masked_mean(const torch::Tensor& x, const torch::Tensor& m) {
  double n = m.sum().item<double>();
  return n > 0 ? (x * m).sum().item<double>() / n : 0.0;
}

// TRL's masked_batch_mean: a (B, 1) per-sequence value is averaged over the rows, a (B, T)
// per-token value over the trained tokens.
double batch_mean(const torch::Tensor& x, const torch::Tensor& m) {
  return x.size(1) == 1 ? x.mean().item<double>() : masked_mean(x, m);
}

bool clipped_family(LossType t) {
  return t == LossType::GRPO || t == LossType::BNPO || t == LossType::DrGRPO || t == LossType::DAPO ||
         t == LossType::LUSPO;
}

// VESPO's sequence weight phi(w) = e^lambda w^k e^(-lambda w) of w = prod_t rho_t (log-ratios
// clamped to +-20 per token, log w to [log 1e-8, 20]), k and lambda by the advantage's sign;
// no gradient (TRL's get_gamma_weights). (B, 1).
torch::Tensor vespo_weights(const torch::Tensor& log_ratio, const torch::Tensor& mask, const torch::Tensor& A,
                            const LossConfig& cfg) {
  torch::NoGradGuard no_grad;
  const double lower = std::log(1e-8);
  auto seq = (torch::clamp(log_ratio.detach(), -20.0, 20.0) * mask).sum(-1, true);  // (B, 1)
  auto log_w = torch::clamp(seq, lower, 20.0);
  auto w = torch::exp(log_w);
  auto nonneg = A >= 0;
  auto k = torch::where(nonneg, torch::full_like(A, cfg.vespo_k_pos), torch::full_like(A, cfg.vespo_k_neg));
  auto lambda = torch::where(nonneg, torch::full_like(A, cfg.vespo_lambda_pos), torch::full_like(A, cfg.vespo_lambda_neg))
                    .clamp_min(1e-4);
  auto phi = torch::exp(lambda + k * log_w - lambda * w);
  return torch::nan_to_num(phi, 0.0, 0.0, 0.0);
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
  if (const char* why = refused_loss_level(cfg.type, cfg.level))
    throw Error(ctx, std::string("loss_type \"") + to_string(cfg.type) + "\" with " + why);
  const int64_t B = in.logp.size(0);
  const int64_t GA = std::max<int64_t>(1, cfg.gradient_accumulation_steps);

  auto mask = in.mask.to(in.logp.scalar_type());
  auto A = in.advantages.to(in.logp.scalar_type()).unsqueeze(1);  // (B, 1)
  auto log_ratio = in.logp - in.old_logp.detach();                 // (B, T)
  auto ratio = torch::exp(log_ratio);                              // (B, T), the per-token ratio (metrics)

  // The importance weight: (B, T) per token, (B, 1) per sequence.
  torch::Tensor log_w;
  switch (cfg.level) {
    case ImportanceSamplingLevel::Token: log_w = log_ratio; break;
    case ImportanceSamplingLevel::Sequence:
      log_w = (log_ratio * mask).sum(-1, true) / mask.sum(-1, true).clamp_min(1.0);
      break;
    case ImportanceSamplingLevel::SequenceToken: {  // sg[s_i] * pi_theta(y_t) / sg[pi_theta(y_t)]
      auto seq = ((log_ratio * mask).sum(-1, true) / mask.sum(-1, true).clamp_min(1.0)).detach();
      log_w = in.logp - in.logp.detach() + seq;
      break;
    }
  }
  auto coef_1 = torch::exp(log_w);

  torch::Tensor policy;  // (B, T) or (B, 1)
  torch::Tensor phi;     // vespo
  switch (cfg.type) {
    case LossType::CISPO: {
      auto clamped = torch::clamp_max(coef_1, cfg.epsilon_high).detach();
      policy = -clamped * A * in.logp;
      break;
    }
    case LossType::SAPO: {
      auto tau = torch::where(A > 0, torch::full_like(A, cfg.sapo_temperature_pos),
                              torch::full_like(A, cfg.sapo_temperature_neg));
      policy = -(torch::sigmoid(tau * (coef_1 - 1.0)) * 4.0 / tau) * A;
      break;
    }
    case LossType::VESPO:
      phi = vespo_weights(log_ratio, mask, A, cfg);
      policy = -phi * A * in.logp;
      break;
    default: {  // grpo, bnpo, dr_grpo, dapo, luspo
      auto coef_2 = torch::clamp(coef_1, 1.0 - cfg.epsilon_low, 1.0 + cfg.epsilon_high);
      if (cfg.delta > 0) coef_1 = torch::clamp_max(coef_1, cfg.delta);  // two-sided clipping
      policy = -torch::min(coef_1 * A, coef_2 * A);
      break;
    }
  }
  // Padding positions carry no per-token value (TRL's hold whatever the model gave there; only
  // luspo's mean over B x T sees them).
  if (policy.size(1) != 1) policy = policy * mask;
  torch::Tensor per_token = policy;
  torch::Tensor kl_ref;
  if (use_ref) {
    auto d = in.ref_logp.detach() - in.logp;                       // (B, T)
    kl_ref = torch::exp(d) - d - 1.0;
    per_token = per_token + cfg.beta * (kl_ref * mask);
  }

  torch::Tensor loss;
  auto masked = per_token * mask;
  switch (cfg.type) {
    case LossType::GRPO:
    case LossType::SAPO:
      loss = (masked.sum(1) / mask.sum(1).clamp_min(1.0)).mean() / GA;
      break;
    case LossType::BNPO:
      loss = masked.sum() / mask.sum().clamp_min(1.0) / GA;
      break;
    case LossType::DrGRPO:
      check(cfg.max_completion_length > 0, ctx, "dr_grpo needs max_completion_length > 0");
      loss = masked.sum() / static_cast<double>(B * cfg.max_completion_length) / GA;
      break;
    case LossType::DAPO:
    case LossType::CISPO:
    case LossType::VESPO: {
      double n = in.num_items_in_batch > 0 ? in.num_items_in_batch : mask.sum().item<double>() * GA;
      loss = masked.sum() / std::max(1.0, n);
      break;
    }
    case LossType::LUSPO:  // each sequence's loss times its length; mean over the (B, 1) or (B, T) entries
      loss = (per_token * mask.sum(1, true)).mean() / GA;
      break;
  }

  LossOutput out;
  out.loss = loss;
  torch::NoGradGuard no_grad;
  auto r = ratio.detach();
  auto lr = log_ratio.detach();
  auto c1 = coef_1.detach();
  auto tokens = mask.sum(1);  // (B)
  auto has = tokens > 0;
  out.metrics["ratio"] = masked_mean(r, mask);
  // Extremes over trained tokens: a fresh sample's ratio must be 1 everywhere, not just on average.
  auto trained = mask > 0;
  out.metrics["ratio_max"] = trained.any().item<bool>() ? r.masked_select(trained).max().item<double>() : 1.0;
  out.metrics["ratio_min"] = trained.any().item<bool>() ? r.masked_select(trained).min().item<double>() : 1.0;
  // "kl": the k3 estimator between the behaviour policy and the current one (AsyncGRPO meaning).
  out.metrics["kl"] = masked_mean(r - 1.0 - lr, mask);
  if (use_ref) out.metrics["kl_ref"] = masked_mean(kl_ref.detach(), mask);
  if (clipped_family(cfg.type)) {
    // On coef_1 after the two-sided cap, as TRL counts them.
    auto low = ((c1 < 1.0 - cfg.epsilon_low) & (A < 0)).to(mask.scalar_type());
    auto high = ((c1 > 1.0 + cfg.epsilon_high) & (A > 0)).to(mask.scalar_type());
    auto region = ((low + high) > 0).to(mask.scalar_type());
    auto per_seq = [&](const torch::Tensor& x) {
      return x.size(1) == 1 ? x.squeeze(1) : (x * mask).sum(1) / tokens.clamp_min(1.0);
    };
    out.metrics["clip_ratio/low_mean"] = batch_mean(low, mask);
    out.metrics["clip_ratio/high_mean"] = batch_mean(high, mask);
    out.metrics["clip_ratio/region_mean"] = batch_mean(region, mask);
    out.metrics["clip_ratio/low_min"] =
        has.any().item<bool>() ? per_seq(low).masked_select(has).min().item<double>() : 0.0;
    out.metrics["clip_ratio/high_max"] =
        has.any().item<bool>() ? per_seq(high).masked_select(has).max().item<double>() : 0.0;
  } else if (cfg.type == LossType::CISPO) {
    out.metrics["cispo_clip_ratio"] = batch_mean(((c1 > cfg.epsilon_high) & (A > 0)).to(mask.scalar_type()), mask);
  } else if (cfg.type == LossType::VESPO) {
    out.metrics["vespo/phi_seq_mean"] = phi.mean().item<double>();
  }
  out.metrics["policy_loss"] = loss.detach().item<double>();
  return out;
}

}  // namespace grpo::grpo
