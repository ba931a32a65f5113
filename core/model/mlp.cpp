// SwiGLU MLP (hidden_act "silu").
#include "core/model/mlp.h"

#include <torch/torch.h>

namespace grpo::model {

MLPImpl::MLPImpl(const io::ModelConfig& c, torch::Dtype dtype, torch::Device device)
    : intermediate_(c.intermediate_size),
      act_(c.hidden_act == "gelu_pytorch_tanh" ? Activation::GeluTanh
           : c.hidden_act == "gelu"            ? Activation::Gelu
                                               : Activation::Silu) {
  auto lin = [&](int64_t in, int64_t out) {
    return LoraLinear(LoraLinearOptions(in, out).bias(c.mlp_bias).dtype(dtype).device(device));
  };
  if (c.fused_gate_up) {
    gate_up_proj = register_module("gate_up_proj", lin(c.hidden_size, 2 * c.intermediate_size));
  } else {
    gate_proj = register_module("gate_proj", lin(c.hidden_size, c.intermediate_size));
    up_proj = register_module("up_proj", lin(c.hidden_size, c.intermediate_size));
  }
  down_proj = register_module("down_proj", lin(c.intermediate_size, c.hidden_size));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  auto act = [&](const torch::Tensor& g) {
    switch (act_) {
      case Activation::GeluTanh: return torch::gelu(g, "tanh");
      case Activation::Gelu: return torch::gelu(g);
      case Activation::Silu: break;
    }
    return torch::silu(g);
  };
  if (!gate_up_proj.is_empty()) {
    auto gu = gate_up_proj(x);  // (B, T, 2I): gate, then up
    return down_proj(gu.narrow(-1, intermediate_, intermediate_) * act(gu.narrow(-1, 0, intermediate_)));
  }
  auto h = act(gate_proj(x)) * up_proj(x);  // (B, T, I)
  return down_proj(h);                       // (B, T, C)
}

}  // namespace grpo::model
