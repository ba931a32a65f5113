// Gated feed-forward block: down_proj(act(gate_proj(x)) * up_proj(x)), act = silu (SwiGLU) or GELU
// (Gemma's GeGLU), every projection a LoraLinear. Phi-3 fuses gate and up into one gate_up_proj
// (gate rows first).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "core/io/hf_config.h"
#include "core/model/lora_linear.h"

namespace grpo::model {

// silu(g) * u: on the CPU in fp32 and fp64 one fused pass, and one autograd node when a gradient is
// wanted; the composite elsewhere.
torch::Tensor swiglu(const torch::Tensor& g, const torch::Tensor& u);

class MLPImpl : public torch::nn::Module {
public:
  MLPImpl(const io::ModelConfig& config, torch::Dtype dtype, torch::Device device);
  torch::Tensor forward(const torch::Tensor& x);  // (B, T, C) -> (B, T, C)
  LoraLinear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  LoraLinear gate_up_proj{nullptr};  // phi3 instead of gate_proj and up_proj
  enum class Activation { Silu, Gelu, GeluTanh };

private:
  int64_t intermediate_;
  Activation act_;
};
TORCH_MODULE(MLP);

}  // namespace grpo::model
