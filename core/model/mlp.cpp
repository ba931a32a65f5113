// SwiGLU MLP (hidden_act "silu").
#include "core/model/mlp.h"

#include <torch/torch.h>

namespace grpo::model {

MLPImpl::MLPImpl(const io::ModelConfig& c, torch::Dtype dtype, torch::Device device) {
  auto lin = [&](int64_t in, int64_t out) {
    return LoraLinear(LoraLinearOptions(in, out).bias(c.mlp_bias).dtype(dtype).device(device));
  };
  gate_proj = register_module("gate_proj", lin(c.hidden_size, c.intermediate_size));
  up_proj = register_module("up_proj", lin(c.hidden_size, c.intermediate_size));
  down_proj = register_module("down_proj", lin(c.intermediate_size, c.hidden_size));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  auto h = torch::silu(gate_proj(x)) * up_proj(x);  // (B, T, I)
  return down_proj(h);                               // (B, T, C)
}

}  // namespace grpo::model
