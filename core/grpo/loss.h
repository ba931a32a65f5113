// The GRPO policy loss as TRL's GRPOTrainer computes it: the importance ratio against the
// sampler's behaviour log-probs (per token, per sequence, or GSPO-token), TRL's policy losses
// (clipped surrogate with optional two-sided cap, CISPO, SAPO, LUSPO, VESPO), optional k3 KL to
// the reference (base) policy, and the loss_type aggregations (docs/formulas.md, "Importance
// ratio" through "Loss aggregation", and "Loss metrics"). Pure function of tensors; metrics come
// back as doubles.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <torch/types.h>

#include "core/grpo/choices.h"

namespace grpo::grpo {

// LossType and its names: core/grpo/choices.h (kLossTypes).
LossType parse_loss_type(const std::string& s, const std::string& context);
const char* to_string(LossType t);

const char* to_string(ImportanceSamplingLevel l);

struct LossConfig {
  LossType type = LossType::DAPO;
  ImportanceSamplingLevel level = ImportanceSamplingLevel::Token;
  double epsilon_low = 0.2;
  double epsilon_high = 0.2;  // TRL: epsilon_high = None means epsilon; cispo: the ratio's cap
  double delta = 0.0;         // > 0: two-sided clipping, the unclipped ratio capped at delta (TRL's delta)
  double sapo_temperature_pos = 1.0, sapo_temperature_neg = 1.05;
  double vespo_k_pos = 2.0, vespo_lambda_pos = 3.0, vespo_k_neg = 3.0, vespo_lambda_neg = 2.0;
  double beta = 0.0;          // > 0 adds beta * KL(pi_theta || pi_ref), k3 estimator
  bool use_bias_correction_kl = false;  // the k3 KL times the importance weight (TRL's)
  // Off-policy sequence masking (DeepSeek-V3.2, TRL's off_policy_mask_threshold): a completion with a
  // negative advantage whose mean log-prob gap sampler - current exceeds this is left out.
  std::optional<double> off_policy_mask_threshold;
  double top_entropy_quantile = 1.0;  // < 1: only tokens at or above this entropy quantile are trained
  bool entropy_bonus = false;         // subtract entropy_coef x the mean token entropy (entropy needs grad)
  double entropy_coef = 0.0;          // the coefficient this step applies (adaptive: the controller's)
  // The proximal-policy correction (TRL's vllm_importance_sampling_*): old_logp is the trainer's own
  // policy at the start of the step, and the gap to the sampler (sampling_logp) weighs the loss.
  bool is_correction = false;
  IsCorrectionMode is_mode = IsCorrectionMode::SequenceMask;
  std::optional<double> is_clip_min;
  std::optional<double> is_clip_max = 3.0;
  int64_t max_completion_length = 0;   // dr_grpo normaliser
  int64_t gradient_accumulation_steps = 1;
};

struct LossInputs {
  torch::Tensor logp;        // (B, T) log pi_theta(o_t) of the sampled completion tokens (with grad)
  torch::Tensor old_logp;    // (B, T) the ratio's denominator (no grad): the sampler's log-probs, or
                             // with is_correction the proximal policy's (the trainer's at step start)
  torch::Tensor ref_logp;    // (B, T) log pi_ref(o_t), only when beta > 0
  torch::Tensor advantages;  // (B)
  torch::Tensor mask;        // (B, T) 1 for completion tokens that are trained, else 0
  // dapo, cispo, vespo: active tokens in the whole accumulated batch (all micro-batches of the step).
  double num_items_in_batch = 0.0;
  torch::Tensor sampling_logp;  // (B, T) the sampler's log-probs when old_logp is not (is_correction);
                                // off-policy masking uses them (else old_logp)
  torch::Tensor entropy;     // (B, T) token entropies: top_entropy_quantile < 1 and the entropy bonus
                             // (with grad for the bonus)
};

struct LossOutput {
  torch::Tensor loss;  // scalar, differentiable w.r.t. logp
  // Metric name -> value, TRL names: ratio (and ratio_min/ratio_max over trained tokens), kl
  // (behaviour vs current, k3), kl_ref (beta > 0), policy_loss, and by loss type:
  // clip_ratio/{low_mean,high_mean,region_mean,low_min,high_max} (grpo, bnpo, dr_grpo, dapo,
  // luspo), cispo_clip_ratio (cispo), vespo/phi_seq_mean (vespo); with is_correction
  // sampling/sampling_logp_difference/{mean,max} and sampling/importance_sampling_ratio/{min,mean,max}
  // (TRL's) and its frac_masked or frac_truncated; off_policy_mask/frac_dropped,
  // entropy_mask/frac_trained.
  std::map<std::string, double> metrics;
  // The entropy the bonus saw: sum over its tokens, and their count (the adaptive controller's input).
  double entropy_sum = 0.0, entropy_tokens = 0.0;
};

// Throws grpo::Error for a loss_type x importance_sampling_level pair TRL refuses.
LossOutput grpo_loss(const LossInputs& in, const LossConfig& cfg);

}  // namespace grpo::grpo
