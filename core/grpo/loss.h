// The GRPO policy loss as TRL's GRPOTrainer computes it: the importance ratio against the
// sampler's behaviour log-probs (per token, per sequence, or GSPO-token), TRL's policy losses
// (clipped surrogate with optional two-sided cap, CISPO, SAPO, LUSPO, VESPO), optional k3 KL to
// the reference (base) policy, and the loss_type aggregations (docs/formulas.md, "Importance
// ratio" through "Loss aggregation", and "Loss metrics"). Pure function of tensors; metrics come
// back as doubles.
#pragma once

#include <map>
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
  int64_t max_completion_length = 0;   // dr_grpo normaliser
  int64_t gradient_accumulation_steps = 1;
};

struct LossInputs {
  torch::Tensor logp;        // (B, T) log pi_theta(o_t) of the sampled completion tokens (with grad)
  torch::Tensor old_logp;    // (B, T) behaviour log-probs from the sampler (no grad)
  torch::Tensor ref_logp;    // (B, T) log pi_ref(o_t), only when beta > 0
  torch::Tensor advantages;  // (B)
  torch::Tensor mask;        // (B, T) 1 for completion tokens that are trained, else 0
  // dapo, cispo, vespo: active tokens in the whole accumulated batch (all micro-batches of the step).
  double num_items_in_batch = 0.0;
};

struct LossOutput {
  torch::Tensor loss;  // scalar, differentiable w.r.t. logp
  // Metric name -> value, TRL names: ratio (and ratio_min/ratio_max over trained tokens), kl
  // (behaviour vs current, k3), kl_ref (beta > 0), policy_loss, and by loss type:
  // clip_ratio/{low_mean,high_mean,region_mean,low_min,high_max} (grpo, bnpo, dr_grpo, dapo,
  // luspo), cispo_clip_ratio (cispo), vespo/phi_seq_mean (vespo).
  std::map<std::string, double> metrics;
};

// Throws grpo::Error for a loss_type x importance_sampling_level pair TRL refuses.
LossOutput grpo_loss(const LossInputs& in, const LossConfig& cfg);

}  // namespace grpo::grpo
