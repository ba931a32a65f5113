// GrpoTrainer: one optimizer step of GRPO on a batch of scored samples. Samples are grouped into
// micro-batches (token_budget rows, or fixed counts); inside a micro-batch, samples of similar
// length form sub-rows, forwarded without padding on CPU (a padded block per micro-batch on
// CUDA) and never attending across samples; completion-token log-probs come from a chunked LM head
// at temperature T (the sampler's processed distribution when top-k/top-p/min-p are off), the
// loss is grpo_loss over gradient accumulation, and AdamW steps the LoRA parameters.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config.h"
#include "core/grpo/loss.h"
#include "core/grpo/optimizer.h"
#include "core/model/causal_lm.h"
#include "core/model/flops.h"

namespace grpo::grpo {

struct TrainSample {
  std::vector<int64_t> prompt_ids;
  std::vector<int64_t> completion_ids;
  std::vector<float> old_logprobs;  // behaviour log-probs, one per completion token
  double advantage = 0.0;
  bool truncated = false;           // finish_reason == "length" (no EOS at the end)
  int64_t policy_version = 0;
  // A batch trained num_iterations times: the proximal policy's log-probs (the trainer's at the
  // batch's first step), recorded by that step when vllm_importance_sampling_correction is on and
  // taken as pi_old by the later ones. Empty on a batch's first step.
  std::vector<float> proximal_logprobs;
};

// Log-probs (B_tokens) of `targets` under softmax(logits / temperature) computed from final hidden
// states (N, C) in chunks of rows, so the (N, V) logits never exist at once. Also returns the
// entropy per row when `entropy` is non-null (differentiable with `entropy_grad`, for the bonus).
torch::Tensor chunked_token_logprobs(model::CausalLMImpl& model, const torch::Tensor& hidden,
                                     const torch::Tensor& targets, double temperature,
                                     torch::Tensor* entropy = nullptr, int64_t chunk_rows = 1024,
                                     bool entropy_grad = false);

// How a micro-batch goes through the model (trainer.cpp, build_row). Segments: one forward of the
// whole row, position-wise work unpadded, attention per segment (model/segments.h), the CPU
// default. Separate and Padded bin units into sub-rows attended densely: Separate is one forward
// per sub-row, Padded one (R, L) block, the CUDA default; Auto picks among them by a cost estimate
// when segments are not available (sliding-window models). Forced by benchmarks and by the tests
// that check every layout agrees.
enum class RowLayout { Auto, Separate, Padded, Segments };

class GrpoTrainer {
public:
  GrpoTrainer(model::CausalLM model, const TrainConfig& config);
  // Shares the run's config object instead of copying it (the engine's retunes replace it).
  GrpoTrainer(model::CausalLM model, SharedConfig config);

  // One optimizer step over every sample (gradient accumulation over its micro-batches).
  // Returns this step's metrics (TRL names: loss, grad_norm, learning_rate, ratio, kl,
  // clip_ratio/*, entropy, completions/*, batch/*, sample/*, perf/*). perf/train_flops: the
  // step's model FLOPs (model/flops.h, LoRA fwd+bwd of every prompt unit as forwarded, a shared
  // prompt once, a segmented row's attention per segment; the LM head on completions).
  std::map<std::string, double> step(const std::vector<TrainSample>& samples);
  // One optimizer step on a batch that num_iterations steps reuse; `pass` counts from 0. Pass 0
  // records each sample's proximal_logprobs when the proximal correction needs them later; with
  // num_iterations > 1 every pass logs batch/reuse_pass. With num_iterations 1, the same as step().
  std::map<std::string, double> step(std::vector<TrainSample>& samples, int64_t pass);
  // The loss and metrics of `samples` without an optimizer step; accumulates gradients into the
  // LoRA parameters when `backward` (used by step(), and by gradient checks).
  std::map<std::string, double> forward_backward(const std::vector<TrainSample>& samples, bool backward);

  // Live retune of the loss and optimizer settings that may change between steps.
  void retune(const TrainConfig& config);
  void retune(SharedConfig config);
  const TrainConfig& config() const { return *config_; }
  void set_row_layout(RowLayout layout) { row_layout_ = layout; }
  // The adaptive entropy controller's state, kept in checkpoints so that a resumed run goes on
  // with the coefficient it had: {"entropy_coef", "last_world_entropy" (null before a measurement)}.
  nlohmann::json controller_state() const;
  // Restores it; an error names `context` and the field for a value of the wrong type or range.
  void restore_controller_state(const nlohmann::json& state, const std::string& context);
  Optimizer& optimizer() { return *optimizer_; }
  model::CausalLM& model() { return model_; }

private:
  // forward_backward, recording each sample's completion log-probs (detached) into `record` when
  // it is not null.
  std::map<std::string, double> forward_backward(const std::vector<TrainSample>& samples, bool backward,
                                                 std::vector<std::vector<float>>* record);
  std::map<std::string, double> finish_step(std::map<std::string, double> metrics,
                                            std::chrono::steady_clock::time_point t_step);

  model::CausalLM model_;
  SharedConfig config_;  // never null
  std::unique_ptr<Optimizer> optimizer_;
  model::ModelFlops flops_;  // per token, for perf/train_flops
  RowLayout row_layout_ = RowLayout::Auto;
  // The entropy bonus's adaptive controller (TRL's use_adaptive_entropy): its coefficient, the last
  // step's measured entropy, and this step's entropy sum and token count.
  double entropy_coef_ = 0.0;
  std::optional<double> last_world_entropy_;
  double bonus_entropy_sum_ = 0.0, bonus_tokens_ = 0.0;
};

}  // namespace grpo::grpo
