#!/usr/bin/env python3
# The GRPO policy loss in plain PyTorch eager, written from TRL's GRPOTrainer._compute_loss and
# its helpers (TRL 1.1.0.dev0, huggingface/trl commit 00a5fd064c67; GSPO-token from
# trl/experimental/gspo_token; docs/formulas.md says which): the importance weight per token,
# per sequence or GSPO-token, the clipped surrogate with the two-sided cap (delta), CISPO, SAPO,
# LUSPO, VESPO's gamma weights, the k3 KL to a reference, and every loss_type's aggregation, with
# TRL's metrics. It needs nothing but torch (Debian's python3-torch).
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
def get_gamma_weights(advantages, log_ratio_per_token, mask, k_pos=2.0, lambda_pos=3.0, k_neg=3.0, lambda_neg=2.0):
    """TRL's GRPOTrainer.get_gamma_weights without the vLLM IS term: phi(w) = e^lam w^k e^(-lam w)."""
    lower_clamp = math.log(1e-8)
    log_ratio_clamped = torch.clamp(log_ratio_per_token, -20.0, 20.0)
    seq_log_ratio = torch.sum(log_ratio_clamped * mask, dim=-1, keepdim=True)  # (B, 1)
    log_w_seq = torch.clamp(seq_log_ratio, lower_clamp, 20.0)
    w_seq = torch.exp(log_w_seq)
    is_nonneg_adv = advantages >= 0
    k_seq = torch.where(is_nonneg_adv, _const(k_pos, advantages), _const(k_neg, advantages))
    lambda_seq = torch.where(is_nonneg_adv, _const(lambda_pos, advantages), _const(lambda_neg, advantages)).clamp(min=1e-4)
    log_phi = lambda_seq + k_seq * log_w_seq - lambda_seq * w_seq
    return torch.exp(log_phi).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)  # (B, 1)


def compute_loss(per_token_logps, old_per_token_logps, advantages, mask, cfg, ref_per_token_logps=None,
                 num_items_in_batch=None, gradient_accumulation_steps=1, with_metrics=True):
    """Returns (loss, metrics). cfg: loss_type, importance_sampling_level, epsilon, epsilon_high,
    delta (None = off), sapo_temperature_pos/neg, vespo_k/lambda_pos/neg, beta, max_completion_length.
    with_metrics=False skips the metrics (the step baseline times the loss as it always did)."""
    loss_type = cfg.get("loss_type", "dapo")
    level = cfg.get("importance_sampling_level", "token")
    epsilon_low = cfg.get("epsilon", 0.2)
    epsilon_high = cfg.get("epsilon_high") if cfg.get("epsilon_high") is not None else epsilon_low
    delta = cfg.get("delta")
    beta = cfg.get("beta", 0.0)
    mask = mask.to(per_token_logps.dtype)
    advantages = advantages.to(per_token_logps.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    if level == "sequence_token" and loss_type not in GSPO_TOKEN_LOSSES:
        raise ValueError(f"Unknown loss type: {loss_type}")  # trl.experimental.gspo_token's GRPOTrainer

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
        phi_seq = get_gamma_weights(advantages, log_ratio, mask, cfg.get("vespo_k_pos", 2.0),
                                    cfg.get("vespo_lambda_pos", 3.0), cfg.get("vespo_k_neg", 3.0),
                                    cfg.get("vespo_lambda_neg", 2.0))
        per_token_loss = -phi_seq * advantages * per_token_logps
    else:
        raise ValueError(f"Unknown loss type: {loss_type}")

    # The one difference from TRL (see the top): per-token values are zero at padding.
    if per_token_loss.shape[1] != 1:
        per_token_loss = per_token_loss * mask
    if beta != 0.0:
        per_token_loss = per_token_loss + beta * (per_token_kl * mask)

    ga = gradient_accumulation_steps
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
    return loss, metrics


def run_cases(cases):
    results = []
    for case in cases:
        t = lambda key: torch.tensor(case[key], dtype=torch.float64)  # noqa: E731
        logp = t("logp").requires_grad_(True)
        ref = t("ref_logp") if case.get("ref_logp") is not None else None
        loss, metrics = compute_loss(logp, t("old_logp"), t("advantages"), t("mask"), case["config"], ref,
                                     case.get("num_items_in_batch"), case.get("gradient_accumulation_steps", 1))
        loss.backward()
        results.append({"loss": loss.item(), "grad": logp.grad.tolist(), "metrics": metrics})
    return results


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)["cases"]
    torch.set_num_threads(1)
    print(json.dumps({"results": run_cases(cases), "torch_version": torch.__version__}))


if __name__ == "__main__":
    main()
