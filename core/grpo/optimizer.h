// The optimizer step: AdamW over the trainable (LoRA) parameters, global gradient-norm clipping,
// and Hugging Face's learning-rate schedules (constant | linear | cosine, with linear warmup).
// State (moments, step) saves and loads for checkpoints.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

namespace torch::optim { class AdamW; }

namespace grpo::grpo {

// transformers.get_scheduler semantics; warmup_steps = ceil(warmup_ratio * total_steps).
// "constant" also honours warmup (HF's constant_with_warmup) when warmup_ratio > 0.
double scheduled_lr(double base_lr, const std::string& type, int64_t step, int64_t total_steps,
                    double warmup_ratio);

struct OptimizerConfig {
  double learning_rate = 1e-5;
  std::string lr_scheduler_type = "constant";
  double warmup_ratio = 0.0;
  int64_t total_steps = 1;
  double max_grad_norm = 1.0;  // <= 0: no clipping
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

// The optimizer settings of any config with TRL's names (TrainConfig, SftConfig): the one
// mapping from a config to OptimizerConfig.
template <class Config>
OptimizerConfig optimizer_config(const Config& c, int64_t total_steps) {
  OptimizerConfig oc;
  oc.learning_rate = c.learning_rate;
  oc.lr_scheduler_type = c.lr_scheduler_type;
  oc.warmup_ratio = c.warmup_ratio;
  oc.total_steps = total_steps;
  oc.max_grad_norm = c.max_grad_norm;
  oc.weight_decay = c.weight_decay;
  oc.beta1 = c.adam_beta1;
  oc.beta2 = c.adam_beta2;
  oc.eps = c.adam_epsilon;
  return oc;
}

class Optimizer {
public:
  Optimizer(std::vector<torch::Tensor> params, OptimizerConfig cfg);
  ~Optimizer();

  // Clips gradients, sets this step's learning rate, steps AdamW, zeroes gradients.
  // Returns the pre-clipping global gradient norm (the `grad_norm` metric).
  double step();
  int64_t steps_done() const { return step_; }
  double current_lr() const { return lr_; }
  // A live retune of the base learning rate (the schedule keeps its shape).
  void set_base_lr(double lr) { cfg_.learning_rate = lr; }
  const OptimizerConfig& config() const { return cfg_; }

  void save(const std::string& path) const;  // torch archive with moments and the step count
  void load(const std::string& path);

private:
  std::vector<torch::Tensor> params_;
  OptimizerConfig cfg_;
  std::unique_ptr<torch::optim::AdamW> adam_;
  int64_t step_ = 0;
  double lr_ = 0.0;
};

}  // namespace grpo::grpo
