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
                            const torch::Tensor& is_ratio, const LossConfig& cfg) {
  torch::NoGradGuard no_grad;
  const double lower = std::log(1e-8);
  auto seq = (torch::clamp(log_ratio.detach(), -20.0, 20.0) * mask).sum(-1, true);  // (B, 1)
  // With the proximal correction, w also carries the sampler gap: log w += sum log(IS ratio).
  if (is_ratio.defined()) seq = seq + torch::clamp(torch::log(is_ratio), lower, 20.0).sum(-1, true);
  auto log_w = torch::clamp(seq, lower, 20.0);
  auto w = torch::exp(log_w);
  auto nonneg = A >= 0;
  auto k = torch::where(nonneg, torch::full_like(A, cfg.vespo_k_pos), torch::full_like(A, cfg.vespo_k_neg));
  auto lambda = torch::where(nonneg, torch::full_like(A, cfg.vespo_lambda_pos), torch::full_like(A, cfg.vespo_lambda_neg))
                    .clamp_min(1e-4);
  auto phi = torch::exp(lambda + k * log_w - lambda * w);
  return torch::nan_to_num(phi, 0.0, 0.0, 0.0);
}
bool sequence_mode(IsCorrectionMode m) {
  return m == IsCorrectionMode::SequenceTruncate || m == IsCorrectionMode::SequenceMask;
}
bool truncate_mode(IsCorrectionMode m) {
  return m == IsCorrectionMode::TokenTruncate || m == IsCorrectionMode::SequenceTruncate;
}

// TRL's importance-sampling ratio between the proximal policy and the sampler, before its bounds:
// exp(old - sampling) per token (B, T), or exp of its sum over the completion per sequence (B, 1);
// a NaN sampler log-prob counts as no gap. No grad.
torch::Tensor raw_is_ratio(const torch::Tensor& old_logp, const torch::Tensor& sampling_logp, const torch::Tensor& mask,
                           IsCorrectionMode mode) {
  torch::NoGradGuard no_grad;
  auto diff = torch::nan_to_num((old_logp - sampling_logp) * mask, 0.0);
  if (sequence_mode(mode)) diff = diff.sum(-1, true);
  return torch::exp(diff);
}

// The ratio truncated into [clip_min, clip_max], or zeroed outside it.
torch::Tensor bounded_is_ratio(const torch::Tensor& raw, const LossConfig& cfg) {
  torch::NoGradGuard no_grad;
  auto r = raw;
  if (truncate_mode(cfg.is_mode)) {
    if (cfg.is_clip_min) r = torch::clamp_min(r, *cfg.is_clip_min);
    if (cfg.is_clip_max) r = torch::clamp_max(r, *cfg.is_clip_max);
  } else {
    auto out = torch::zeros_like(r, torch::kBool);
    if (cfg.is_clip_min) out = out | (r < *cfg.is_clip_min);
    if (cfg.is_clip_max) out = out | (r > *cfg.is_clip_max);
    r = r.masked_fill(out, 0.0);
  }
  return r;
}

// TRL's get_off_policy_mask: keep a completion when its advantage is >= 0 or its mean
// sampler-minus-current log-prob gap is <= the threshold. (B, 1).
torch::Tensor off_policy_mask(const torch::Tensor& A, const torch::Tensor& logp, const torch::Tensor& sampling,
                              const torch::Tensor& mask, double threshold) {
  torch::NoGradGuard no_grad;
  auto kl = sampling - logp.detach();
  auto avg = (kl * mask).sum(1, true) / mask.sum(1, true).clamp_min(1.0);
  return ((A >= 0) | (avg <= threshold)).to(mask.scalar_type());
}

// TRL's get_high_entropy_mask: trained tokens whose entropy is at or above the `q` quantile (linear
// interpolation) of the trained tokens' entropies. (B, T) in the mask's dtype.
torch::Tensor high_entropy_mask(const torch::Tensor& entropy, const torch::Tensor& mask, double q) {
  torch::NoGradGuard no_grad;
  auto trained = mask > 0;
  auto local = entropy.detach().masked_select(trained);
  if (local.numel() == 0) return torch::zeros_like(mask);
  auto threshold = torch::quantile(local, q);
  return ((entropy.detach() * mask >= threshold) & trained).to(mask.scalar_type());
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
  const bool need_entropy = cfg.top_entropy_quantile < 1.0 || cfg.entropy_bonus;
  check(!need_entropy || (in.entropy.defined() && in.entropy.sizes() == in.logp.sizes()), ctx,
        "top_entropy_quantile < 1 and the entropy bonus need entropy of shape (B, T)");
  check(!cfg.is_correction || (in.sampling_logp.defined() && in.sampling_logp.sizes() == in.logp.sizes()), ctx,
        "the proximal-policy correction needs sampling_logp of shape (B, T)");
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
  const torch::Tensor sampling = in.sampling_logp.defined() ? in.sampling_logp.detach() : in.old_logp.detach();
  torch::Tensor raw_ratio, is_ratio;  // (B, T) or (B, 1), no grad
  if (cfg.is_correction) {
    raw_ratio = raw_is_ratio(in.old_logp.detach(), sampling, mask, cfg.is_mode);
    is_ratio = bounded_is_ratio(raw_ratio, cfg);
  }

  // k3 KL to the reference, optionally times the (undetached, uncapped) importance weight.
  torch::Tensor kl_ref;
  if (use_ref) {
    auto d = in.ref_logp.detach() - in.logp;                       // (B, T)
    kl_ref = torch::exp(d) - d - 1.0;
    if (cfg.use_bias_correction_kl) kl_ref = kl_ref * coef_1;
  }

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
      phi = vespo_weights(log_ratio, mask, A, is_ratio, cfg);
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
  torch::Tensor opsm, emask;
  if (cfg.off_policy_mask_threshold) {
    opsm = off_policy_mask(A, in.logp, sampling, mask, *cfg.off_policy_mask_threshold);
    policy = policy * opsm;
  }
  if (cfg.top_entropy_quantile < 1.0) {
    emask = high_entropy_mask(in.entropy, mask, 1.0 - cfg.top_entropy_quantile);
    policy = policy * emask;
  }
  if (cfg.is_correction && cfg.type != LossType::VESPO) policy = policy * is_ratio;  // vespo has it in phi
  torch::Tensor per_token = policy;
  if (use_ref) per_token = per_token + cfg.beta * (kl_ref * mask);

  torch::Tensor loss;
  double token_normaliser = 0.0;  // dapo, cispo, vespo
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
      token_normaliser = std::max(1.0, n);
      loss = masked.sum() / token_normaliser;
      break;
    }
    case LossType::LUSPO:  // each sequence's loss times its length; mean over the (B, 1) or (B, T) entries
      loss = (per_token * mask.sum(1, true)).mean() / GA;
      break;
  }

  LossOutput out;
  const auto policy_loss = loss.detach();
  // Entropy bonus (TRL's entropy_coef): minus coef x the mean token entropy over the trained (and
  // entropy-masked) tokens, normalised so that it sums to that mean over the step's micro-batches.
  if (cfg.entropy_bonus) {
    auto eff = emask.defined() ? mask * emask : mask;
    auto h_sum = (in.entropy * eff).sum();
    auto entropy_loss = token_normaliser > 0 ? h_sum / token_normaliser : h_sum / eff.sum().clamp_min(1.0) / GA;
    loss = loss - cfg.entropy_coef * entropy_loss;
    out.entropy_sum = h_sum.detach().item<double>();
    out.entropy_tokens = eff.sum().item<double>();
  }
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
  if (cfg.is_correction) {
    auto trained = mask > 0;
    auto gap = (in.old_logp.detach() - sampling).abs().masked_select(trained);
    out.metrics["sampling/sampling_logp_difference/mean"] = gap.numel() ? gap.mean().item<double>() : 0.0;
    out.metrics["sampling/sampling_logp_difference/max"] = gap.numel() ? gap.max().item<double>() : 0.0;
    auto flat = is_ratio.size(1) == 1 ? is_ratio.flatten() : is_ratio.masked_select(trained);
    const bool any = flat.numel() > 0;
    out.metrics["sampling/importance_sampling_ratio/min"] = any ? flat.min().item<double>() : 0.0;
    out.metrics["sampling/importance_sampling_ratio/mean"] = any ? flat.mean().item<double>() : 0.0;
    out.metrics["sampling/importance_sampling_ratio/max"] = any ? flat.max().item<double>() : 0.0;
    if (truncate_mode(cfg.is_mode)) {  // entries the clamp moved
      auto moved = (raw_ratio != is_ratio).to(mask.scalar_type());
      out.metrics["sampling/importance_sampling_ratio/frac_truncated"] = batch_mean(moved, mask);
    } else {
      out.metrics["sampling/importance_sampling_ratio/frac_masked"] = batch_mean((is_ratio == 0).to(mask.scalar_type()), mask);
    }
  }
  if (opsm.defined()) out.metrics["off_policy_mask/frac_dropped"] = 1.0 - opsm.mean().item<double>();
  if (emask.defined()) out.metrics["entropy_mask/frac_trained"] = masked_mean(emask, mask);
  out.metrics["policy_loss"] = policy_loss.item<double>();
  return out;
}

}  // namespace grpo::grpo
