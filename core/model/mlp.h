// SwiGLU feed-forward block: down_proj(silu(gate_proj(x)) * up_proj(x)), all three LoraLinear.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "core/io/hf_config.h"
#include "core/model/lora_linear.h"

namespace grpo::model {

class MLPImpl : public torch::nn::Module {
public:
  MLPImpl(const io::ModelConfig& config, torch::Dtype dtype, torch::Device device);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)
  LoraLinear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(MLP);

}  // namespace grpo::model
