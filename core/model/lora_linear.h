// LoraLinear: the one linear layer of the model. Every projection (q/k/v/o, gate/up/down) and the
// untied lm_head is a LoraLinear, so LoRA has no per-layer special cases.
//
//   y = x W^T + b  [+ scaling * (dropout(x) A^T) B^T   when an adapter is attached and enabled]
//
// The base weight "weight" [out, in] and bias "bias" [out] keep their Hugging Face names; the
// adapter factors register as "lora_A.weight" [r, in] and "lora_B.weight" [out, r], the PEFT
// names without the adapter-name segment. The adapter is kept in fp32 (fp64 for a double model)
// whatever the compute dtype, as PEFT's autocast_adapter_dtype does.
#pragma once

#include <cstdint>
#include <vector>

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace grpo::model {

struct LoraLinearOptions {
  LoraLinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  TORCH_ARG(bool, bias) = false;
  TORCH_ARG(torch::Dtype, dtype) = torch::kFloat32;  // dtype of the base weight
  TORCH_ARG(torch::Device, device) = torch::Device(torch::kCPU);
};

// Holder of one LoRA factor, so that its parameter is named "lora_A.weight" / "lora_B.weight".
class LoraFactorImpl : public torch::nn::Module {
public:
  LoraFactorImpl(int64_t rows, int64_t cols, torch::TensorOptions options);
  torch::Tensor weight;
};
TORCH_MODULE(LoraFactor);

class LoraLinearImpl : public torch::nn::Module {
public:
  // The base weight starts uninitialised (a checkpoint load fills it); reset_parameters()
  // draws it from N(0, std) and zeroes the bias, as Hugging Face's _init_weights does.
  explicit LoraLinearImpl(const LoraLinearOptions& options);
  void reset_parameters(double std = 0.02);

  // (..., in) -> (..., out): lora_linear_group of this layer alone.
  torch::Tensor forward(const torch::Tensor& x);
  // The same with plain operators, one autograd node each: what runs with dropout in training or a
  // base that trains, and without an active adapter.
  torch::Tensor forward_composite(const torch::Tensor& x);

  // Attaches a fresh adapter with PEFT's init: A Kaiming-uniform(a=sqrt(5)), B zeros.
  // Replaces an existing one. dropout applies to the adapter input in train mode only.
  void add_lora(int64_t r, double scaling, double dropout);
  void remove_lora();
  bool has_lora() const { return !lora_A.is_empty(); }
  int64_t lora_rank() const { return has_lora() ? lora_A->weight.size(0) : 0; }
  double lora_scaling() const { return scaling_; }
  double lora_dropout() const { return dropout_; }
  // An adapter that forward adds: attached, enabled and not merged into the base.
  bool adapter_active() const { return has_lora() && enabled_ && !merged_; }

  // Disabled: forward is exactly the base layer (the adapter is skipped, nothing is copied).
  // Disabling a merged adapter unmerges it first.
  void set_lora_enabled(bool enabled);
  bool lora_enabled() const { return enabled_; }

  // W += scaling * B A (no grad); forward then skips the adapter. unmerge() subtracts it again
  // (exact up to rounding in W's dtype: a bf16 base does not come back bit-identical).
  void merge();
  void unmerge();
  bool merged() const { return merged_; }

  const LoraLinearOptions& options() const { return options_; }

  torch::Tensor weight;  // (out, in)
  torch::Tensor bias;    // (out) or undefined
  LoraFactor lora_A{nullptr};  // weight (r, in)
  LoraFactor lora_B{nullptr};  // weight (out, r)

private:
  torch::Tensor delta_weight() const;  // scaling * B A in the base weight's dtype, (out, in)
  LoraLinearOptions options_;
  double scaling_ = 0.0;
  double dropout_ = 0.0;
  bool enabled_ = true;
  bool merged_ = false;
};
TORCH_MODULE(LoraLinear);

// The projections of one input (q, k and v; gate and up), each as its layer's forward(x) would give
// it, with the adapters' x A^T taken as one product over the stacked A's and, where it does less
// work, each adapter folded into its base weight for the products. With a backward to come this is
// one autograd node whose backward writes dx once and takes every dA from one product
// (docs/formulas.md, "Fused nodes"). Layers that cannot share it (an adapter off, merged or with
// dropout in training, a base that trains, different inputs or dtypes) run their own forward.
std::vector<torch::Tensor> lora_linear_group(const torch::Tensor& x, const std::vector<LoraLinearImpl*>& layers);

// Whether that group folds the adapters into the base weights for `rows` rows of input in `dtype`.
bool lora_group_merges(int64_t rows, torch::ScalarType dtype, const std::vector<LoraLinearImpl*>& layers);

}  // namespace grpo::model
