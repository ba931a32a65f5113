#!/usr/bin/env python3
# The GRPO policy loss in plain PyTorch eager, written from TRL's GRPOTrainer._compute_loss and
# its helpers (TRL 1.1.0.dev0, huggingface/trl commit 00a5fd064c67; GSPO-token from
# trl/experimental/gspo_token; docs/formulas.md says which): the importance weight per token,
# per sequence or GSPO-token, the clipped surrogate with the two-sided cap (delta), CISPO, SAPO,
# LUSPO, VESPO's gamma weights, the k3 KL to a reference (with TRL's use_bias_correction_kl), and
# every loss_type's aggregation, with TRL's metrics. Also the off-policy pieces of the same trainer:
# the vLLM importance-sampling correction (the ratio proximal/sampler, TRL's
# vllm_importance_sampling_mode with the clip_min/clip_max bounds of TRL 1.10+), off-policy sequence
# masking (get_off_policy_mask), the top-entropy token mask (get_high_entropy_mask), and the entropy
# bonus of TRL 1.10+ (entropy_coef; the coefficient given is the one applied). It needs nothing but
# torch (Debian's python3-torch).
#
# One deliberate difference from TRL, the same as core/grpo/loss.cpp's: per-token values at
# padding positions are zero here. TRL's hold whatever the model computed for the pad tokens;
# every aggregation but luspo's multiplies them by the mask, and luspo's mean over B x T (a
# token-level luspo, or a sequence-level one with beta != 0) would add them in.
#
# Two uses:
#   loss_reference.py CASES.json   -> one JSON line: {"results": [{"loss", "grad", "metrics"}]}
#     where CASES.json is {"cases": [{"config": {...}, "logp", "old_logp", "ref_logp", "advantages",
#     "mask", "num_items_in_batch", "gradient_accumulation_steps"}]}, all in float64
#     (tests/grpo/test_loss_reference.cpp writes them and compares with grpo_loss);
#   `from loss_reference import compute_loss` (tests/bench/grpo_step_baseline.py).
import json
import math
import sys

import torch

CLIPPED = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")
GSPO_TOKEN_LOSSES = ("grpo", "bnpo", "dr_grpo", "dapo")


def _const(value, like):
    # TRL writes torch.where(cond, 1.0, 1.05): two Python floats become float32 constants, so
    # in float64 a temperature of 1.05 would carry float32's rounding (2e-8 here). The constant is
    # made in the tensors' own dtype instead, the value TRL means.
    return torch.tensor(value, dtype=like.dtype)


@torch.no_grad()
def get_gamma_weights(advantages, log_ratio_per_token, mask, importance_sampling_ratio, k_pos=2.0, lambda_pos=3.0,
                      k_neg=3.0, lambda_neg=2.0):
    """TRL's GRPOTrainer.get_gamma_weights: phi(w) = e^lam w^k e^(-lam w)."""
    lower_clamp = math.log(1e-8)
    log_ratio_clamped = torch.clamp(log_ratio_per_token, -20.0, 20.0)
    seq_log_ratio = torch.sum(log_ratio_clamped * mask, dim=-1, keepdim=True)  # (B, 1)
    if importance_sampling_ratio is not None:
        log_is_ratio = torch.clamp(torch.log(importance_sampling_ratio), lower_clamp, 20.0)
        seq_log_ratio += torch.sum(log_is_ratio, dim=-1, keepdim=True)
    log_w_seq = torch.clamp(seq_log_ratio, lower_clamp, 20.0)
    w_seq = torch.exp(log_w_seq)
    is_nonneg_adv = advantages >= 0
    k_seq = torch.where(is_nonneg_adv, _const(k_pos, advantages), _const(k_neg, advantages))
    lambda_seq = torch.where(is_nonneg_adv, _const(lambda_pos, advantages), _const(lambda_neg, advantages)).clamp(min=1e-4)
    log_phi = lambda_seq + k_seq * log_w_seq - lambda_seq * w_seq
    return torch.exp(log_phi).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)  # (B, 1)


@torch.no_grad()
def importance_sampling_ratio(old_per_token_logps, sampling_per_token_logps, mask, mode, clip_min, clip_max):
    """TRL's vLLM importance-sampling ratio (GRPOTrainer._generate_and_score_completions): (B, T) for the
    token_* modes, (B, 1) for sequence_*; NaN sampler log-probs count as no gap."""
    per_token_logps_diff = torch.nan_to_num((old_per_token_logps - sampling_per_token_logps) * mask, nan=0.0)
    if mode in ("sequence_mask", "sequence_truncate"):
        logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)
    else:
        logps_diff = per_token_logps_diff
    ratio = torch.exp(logps_diff)
    if mode in ("sequence_truncate", "token_truncate"):
        ratio = torch.clamp(ratio, min=clip_min, max=clip_max)
    elif mode in ("sequence_mask", "token_mask"):
        min_val = clip_min if clip_min is not None else -math.inf
        max_val = clip_max if clip_max is not None else math.inf
        ratio = ratio.masked_fill((ratio < min_val) | (ratio > max_val), value=0.0)
    else:
        raise ValueError(f"Unknown vLLM importance sampling level: {mode}")
    return ratio


def get_off_policy_mask(advantages, per_token_logps, sampling_per_token_logps, mask, off_policy_threshold):
    """TRL's GRPOTrainer.get_off_policy_mask: (B, 1), 1 = keep."""
    kl_div = sampling_per_token_logps - per_token_logps.detach()
    seq_kl_sum = (kl_div * mask).sum(dim=1, keepdim=True)
    avg_seq_kl = seq_kl_sum / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
    is_pos_adv = advantages >= 0
    is_low_kl = avg_seq_kl <= off_policy_threshold
    return (is_pos_adv | is_low_kl).to(dtype=mask.dtype)


def get_high_entropy_mask(entropies, mask, threshold):
    """TRL's GRPOTrainer.get_high_entropy_mask on one process (the gather is the identity)."""
    local = entropies.detach()[mask.bool()]
    if local.numel() == 0:
        return torch.zeros_like(entropies, dtype=torch.bool)
    entropy_threshold = torch.quantile(local, threshold)
    masked_entropies = entropies.detach() * mask
    entropy_mask = masked_entropies >= entropy_threshold
    return entropy_mask & mask.bool()


def compute_loss(per_token_logps, old_per_token_logps, advantages, mask, cfg, ref_per_token_logps=None,
                 num_items_in_batch=None, gradient_accumulation_steps=1, with_metrics=True,
                 sampling_per_token_logps=None, entropies=None):
    """Returns (loss, metrics). cfg: loss_type, importance_sampling_level, epsilon, epsilon_high,
    delta (None = off), sapo_temperature_pos/neg, vespo_k/lambda_pos/neg, beta, use_bias_correction_kl,
    max_completion_length, off_policy_mask_threshold (None = off), top_entropy_quantile, entropy_bonus
    with entropy_coef, vllm_importance_sampling_correction with _mode, _clip_min, _clip_max.
    old_per_token_logps are the proximal policy's when the correction is on (then
    sampling_per_token_logps are the sampler's). with_metrics=False skips the metrics (the step
    baseline times the loss as it always did)."""
    loss_type = cfg.get("loss_type", "dapo")
    level = cfg.get("importance_sampling_level", "token")
    epsilon_low = cfg.get("epsilon", 0.2)
    epsilon_high = cfg.get("epsilon_high") if cfg.get("epsilon_high") is not None else epsilon_low
    delta = cfg.get("delta")
    beta = cfg.get("beta", 0.0)
    correction = cfg.get("vllm_importance_sampling_correction", False)
    is_mode = cfg.get("vllm_importance_sampling_mode", "sequence_mask")
    off_policy_mask_threshold = cfg.get("off_policy_mask_threshold")
    top_entropy_quantile = cfg.get("top_entropy_quantile", 1.0)
    mask = mask.to(per_token_logps.dtype)
    advantages = advantages.to(per_token_logps.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    if level == "sequence_token" and loss_type not in GSPO_TOKEN_LOSSES:
        raise ValueError(f"Unknown loss type: {loss_type}")  # trl.experimental.gspo_token's GRPOTrainer

    is_ratio = None
    if correction:
        is_ratio = importance_sampling_ratio(old_per_token_logps, sampling_per_token_logps, mask, is_mode,
                                             cfg.get("vllm_importance_sampling_clip_min"),
                                             cfg.get("vllm_importance_sampling_clip_max", 3.0))
    entropy_mask = None
    if top_entropy_quantile < 1.0:
        entropy_mask = get_high_entropy_mask(entropies, mask, 1 - top_entropy_quantile)
    if off_policy_mask_threshold is not None:
        sampling = sampling_per_token_logps if sampling_per_token_logps is not None else old_per_token_logps
        off_policy_mask = get_off_policy_mask(advantages, per_token_logps, sampling, mask, off_policy_mask_threshold)

    log_ratio = per_token_logps - old_per_token_logps
    if level == "token":
        log_importance_weights = log_ratio
    elif level == "sequence":
        log_importance_weights = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        log_importance_weights = log_importance_weights.unsqueeze(-1)
    elif level == "sequence_token":
        # GSPO-token: sg[si(θ)] * πθ(yi,t)/sg[πθ(yi,t)]
        seq_level_log_weight = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        seq_level_log_weight = seq_level_log_weight.detach().unsqueeze(-1)
        log_importance_weights = per_token_logps - per_token_logps.detach() + seq_level_log_weight
    else:
        raise ValueError(f"Unknown importance sampling level: {level}")
    coef_1 = torch.exp(log_importance_weights)

    if beta != 0.0:
        per_token_kl = torch.exp(ref_per_token_logps - per_token_logps) - (ref_per_token_logps - per_token_logps) - 1
        if cfg.get("use_bias_correction_kl", False):
            per_token_kl = per_token_kl * coef_1

    phi_seq = None
    if loss_type == "cispo":
        clamped_ratios = torch.clamp(coef_1, max=epsilon_high).detach()
        per_token_loss = -clamped_ratios * advantages * per_token_logps
    elif loss_type in CLIPPED:
        coef_2 = torch.clamp(coef_1, 1 - epsilon_low, 1 + epsilon_high)
        if delta is not None:  # two-sided clipping
            coef_1 = torch.clamp(coef_1, max=delta)
        per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
    elif loss_type == "sapo":
        temperatures = torch.where(advantages > 0, _const(cfg.get("sapo_temperature_pos", 1.0), advantages),
                                   _const(cfg.get("sapo_temperature_neg", 1.05), advantages))
        soft_coef_1 = torch.sigmoid(temperatures * (coef_1 - 1)) * 4 / temperatures
        per_token_loss = -soft_coef_1 * advantages
    elif loss_type == "vespo":
        phi_seq = get_gamma_weights(advantages, log_ratio, mask, is_ratio, cfg.get("vespo_k_pos", 2.0),
                                    cfg.get("vespo_lambda_pos", 3.0), cfg.get("vespo_k_neg", 3.0),
                                    cfg.get("vespo_lambda_neg", 2.0))
        per_token_loss = -phi_seq * advantages * per_token_logps
    else:
        raise ValueError(f"Unknown loss type: {loss_type}")

    # The one difference from TRL (see the top): per-token values are zero at padding.
    if per_token_loss.shape[1] != 1:
        per_token_loss = per_token_loss * mask
    if off_policy_mask_threshold is not None:
        per_token_loss = per_token_loss * off_policy_mask
    if entropy_mask is not None:
        per_token_loss = per_token_loss * entropy_mask
    if correction and loss_type != "vespo":
        per_token_loss = per_token_loss * is_ratio
    if beta != 0.0:
        per_token_loss = per_token_loss + beta * (per_token_kl * mask)

    ga = gradient_accumulation_steps
    normalizer = ga
    if loss_type in ("grpo", "sapo"):
        loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / ga
    elif loss_type == "bnpo":
        loss = (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0) / ga
    elif loss_type == "dr_grpo":
        loss = (per_token_loss * mask).sum() / (per_token_loss.size(0) * cfg["max_completion_length"]) / ga
    elif loss_type in ("cispo", "dapo", "vespo"):
        normalizer = num_items_in_batch if num_items_in_batch else mask.sum().item() * ga
        loss = (per_token_loss * mask).sum() / max(1.0, normalizer)
    else:  # luspo
        loss = (per_token_loss * mask.sum(1, keepdim=True)).mean() / ga

    # TRL 1.10+'s entropy bonus: the mean token entropy over the step, whatever the aggregation.
    if cfg.get("entropy_bonus", False):
        effective_mask = mask if entropy_mask is None else mask * entropy_mask
        if loss_type in ("cispo", "dapo", "vespo"):
            entropy_loss = (entropies * effective_mask).sum() / max(1.0, normalizer)
        else:
            entropy_loss = (entropies * effective_mask).sum() / effective_mask.sum().clamp(min=1.0) / normalizer
        loss = loss - cfg.get("entropy_coef", 0.0) * entropy_loss

    # TRL's metrics (one process: gather is the identity).
    completion_token_count = mask.sum().clamp(min=1.0)

    def masked_batch_mean(x):
        if x.shape[1] == 1:
            return x.mean()
        return (x * mask).sum() / completion_token_count

    metrics = {}
    if not with_metrics:
        return loss, metrics
    with torch.no_grad():
        if beta != 0.0:
            metrics["kl_ref"] = masked_batch_mean(per_token_kl).item()
        if loss_type in CLIPPED:
            is_low_clipped = (coef_1 < 1 - epsilon_low) & (advantages < 0)
            is_high_clipped = (coef_1 > 1 + epsilon_high) & (advantages > 0)
            is_region_clipped = is_low_clipped | is_high_clipped
            metrics["clip_ratio/low_mean"] = masked_batch_mean(is_low_clipped.to(mask.dtype)).item()
            metrics["clip_ratio/high_mean"] = masked_batch_mean(is_high_clipped.to(mask.dtype)).item()
            metrics["clip_ratio/region_mean"] = masked_batch_mean(is_region_clipped.to(mask.dtype)).item()
        elif loss_type == "cispo":
            is_cispo_clipped = (coef_1 > epsilon_high) & (advantages > 0)
            metrics["cispo_clip_ratio"] = masked_batch_mean(is_cispo_clipped.to(mask.dtype)).item()
        elif loss_type == "vespo":
            metrics["vespo/phi_seq_mean"] = phi_seq.mean().item()
        if correction:  # TRL's sampling/* metrics; frac_masked / frac_truncated are GRPO Studio's
            trained = mask.bool()
            delta = torch.abs(old_per_token_logps - sampling_per_token_logps)[trained]
            metrics["sampling/sampling_logp_difference/mean"] = delta.mean().item() if delta.numel() else 0.0
            metrics["sampling/sampling_logp_difference/max"] = delta.max().item() if delta.numel() else 0.0
            flat = is_ratio.flatten() if is_ratio.shape[1] == 1 else is_ratio[trained]
            metrics["sampling/importance_sampling_ratio/min"] = flat.min().item() if flat.numel() else 0.0
            metrics["sampling/importance_sampling_ratio/mean"] = flat.mean().item() if flat.numel() else 0.0
            metrics["sampling/importance_sampling_ratio/max"] = flat.max().item() if flat.numel() else 0.0
            if is_mode.endswith("_truncate"):
                diff = torch.nan_to_num((old_per_token_logps - sampling_per_token_logps) * mask, nan=0.0)
                raw = torch.exp(diff.sum(dim=-1, keepdim=True) if is_mode.startswith("sequence") else diff)
                metrics["sampling/importance_sampling_ratio/frac_truncated"] = masked_batch_mean(
                    (raw != is_ratio).to(mask.dtype)).item()
            else:
                metrics["sampling/importance_sampling_ratio/frac_masked"] = masked_batch_mean(
                    (is_ratio == 0).to(mask.dtype)).item()
        if off_policy_mask_threshold is not None:
            metrics["off_policy_mask/frac_dropped"] = 1.0 - off_policy_mask.mean().item()
        if entropy_mask is not None:
            metrics["entropy_mask/frac_trained"] = ((entropy_mask.to(mask.dtype) * mask).sum() / completion_token_count).item()
    return loss, metrics


def run_cases(cases):
    results = []
    for case in cases:
        t = lambda key: torch.tensor(case[key], dtype=torch.float64)  # noqa: E731
        logp = t("logp").requires_grad_(True)
        ref = t("ref_logp") if case.get("ref_logp") is not None else None
        sampling = t("sampling_logp") if case.get("sampling_logp") is not None else None
        entropy = t("entropy").requires_grad_(True) if case.get("entropy") is not None else None
        loss, metrics = compute_loss(logp, t("old_logp"), t("advantages"), t("mask"), case["config"], ref,
                                     case.get("num_items_in_batch"), case.get("gradient_accumulation_steps", 1),
                                     sampling_per_token_logps=sampling, entropies=entropy)
        loss.backward()
        result = {"loss": loss.item(), "grad": logp.grad.tolist(), "metrics": metrics}
        if entropy is not None:
            result["entropy_grad"] = entropy.grad.tolist() if entropy.grad is not None else None
        results.append(result)
    return results


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    torch.set_num_threads(1)
    print(json.dumps({"results": run_cases(cases), "torch_version": torch.__version__}))


if __name__ == "__main__":
    main()
