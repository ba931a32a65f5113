// LoraLinear: base linear + optional LoRA adapter, computed on 2D views with fused addmm.
#include "core/model/lora_linear.h"

#include <cmath>

#include <torch/torch.h>

namespace grpo::model {

LoraFactorImpl::LoraFactorImpl(int64_t rows, int64_t cols, torch::TensorOptions options) {
  weight = register_parameter("weight", torch::empty({rows, cols}, options));
}

LoraLinearImpl::LoraLinearImpl(const LoraLinearOptions& options) : options_(options) {
  auto to = torch::TensorOptions().dtype(options.dtype()).device(options.device());
  weight = register_parameter("weight",
                              torch::empty({options.out_features(), options.in_features()}, to));
  if (options.bias()) bias = register_parameter("bias", torch::zeros({options.out_features()}, to));
}

void LoraLinearImpl::reset_parameters(double std) {
  torch::NoGradGuard no_grad;
  weight.normal_(0.0, std);
  if (bias.defined()) bias.zero_();
}

torch::Tensor LoraLinearImpl::forward(const torch::Tensor& x) {
  const int64_t in = options_.in_features(), out = options_.out_features();
  auto sizes = x.sizes().vec();
  auto x2 = x.reshape({-1, in});  // (N, in)
  torch::Tensor y2 = bias.defined() ? torch::addmm(bias, x2, weight.t())  // (N, out)
                                    : torch::mm(x2, weight.t());
  if (has_lora() && enabled_ && !merged_) {
    auto xa = x2;
    if (dropout_ > 0.0 && is_training()) xa = torch::dropout(xa, dropout_, /*train=*/true);
    const auto& A = lora_A->weight;  // (r, in)
    const auto& B = lora_B->weight;  // (out, r)
    auto dt = x.scalar_type();
    auto h = torch::mm(xa, A.to(dt).t()).mul_(scaling_);  // (N, r), scaled while small
    y2 = y2.addmm_(h, B.to(dt).t());                        // (N, out) += h B^T
  }
  sizes.back() = out;
  return y2.view(sizes);
}

void LoraLinearImpl::add_lora(int64_t r, double scaling, double dropout) {
  remove_lora();
  auto dt = options_.dtype() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  auto to = torch::TensorOptions().dtype(dt).device(weight.device());
  lora_A = register_module("lora_A", LoraFactor(r, options_.in_features(), to));
  lora_B = register_module("lora_B", LoraFactor(options_.out_features(), r, to));
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(lora_A->weight, std::sqrt(5.0));
  lora_B->weight.zero_();
  scaling_ = scaling;
  dropout_ = dropout;
  enabled_ = true;
  merged_ = false;
}

void LoraLinearImpl::set_lora_enabled(bool enabled) {
  if (!enabled && merged_) unmerge();
  enabled_ = enabled;
}

void LoraLinearImpl::remove_lora() {
  if (!has_lora()) return;
  if (merged_) unmerge();
  unregister_module("lora_A");
  unregister_module("lora_B");
  lora_A = nullptr;
  lora_B = nullptr;
}

torch::Tensor LoraLinearImpl::delta_weight() const {
  auto acc = lora_A->weight.scalar_type();  // fp32 or fp64
  auto d = torch::mm(lora_B->weight.to(acc), lora_A->weight.to(acc)) * scaling_;  // (out, in)
  return d.to(weight.scalar_type());
}

void LoraLinearImpl::merge() {
  if (!has_lora() || merged_) return;
  torch::NoGradGuard no_grad;
  weight.add_(delta_weight());
  merged_ = true;
}

void LoraLinearImpl::unmerge() {
  if (!has_lora() || !merged_) return;
  torch::NoGradGuard no_grad;
  weight.sub_(delta_weight());
  merged_ = false;
}

}  // namespace grpo::model
