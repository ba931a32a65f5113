// SwiGLU MLP (hidden_act "silu"); GeGLU for Gemma.
#include "core/model/mlp.h"

#include <torch/torch.h>

namespace grpo::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// silu(g) * u in one autograd node (docs/formulas.md, "Fused nodes"). The forward
// takes one vectorised sigmoid and one pass over g, u and s; the backward needs no exp at all:
//   du = dh * g * s,   dg = dh * u * s * (1 + g * (1 - s)).
// The composite silu(g) * u evaluates sigmoid twice (silu, then silu_backward) and makes three more
// passes for the product and its two gradients.
template <typename T>
void swiglu_forward_kernel(const T* __restrict g, const T* __restrict u, const T* __restrict s, T* __restrict h,
                           int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = g[i] * s[i] * u[i];
}

template <typename T>
void swiglu_backward_kernel(const T* __restrict dh, const T* __restrict g, const T* __restrict u,
                            const T* __restrict s, T* __restrict dg, T* __restrict du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T gs = g[i] * s[i];
    du[i] = dh[i] * gs;
    dg[i] = dh[i] * u[i] * (s[i] + gs * (T(1) - s[i]));
  }
}

// h = g * s * u and s = sigmoid(g), for contiguous fp32 or fp64 g and u of one shape.
std::pair<torch::Tensor, torch::Tensor> swiglu_values(const torch::Tensor& g, const torch::Tensor& u) {
  auto s = torch::sigmoid(g);
  auto h = torch::empty_like(g);
  if (g.scalar_type() == torch::kFloat64)
    swiglu_forward_kernel(g.data_ptr<double>(), u.data_ptr<double>(), s.data_ptr<double>(), h.data_ptr<double>(),
                          g.numel());
  else
    swiglu_forward_kernel(g.data_ptr<float>(), u.data_ptr<float>(), s.data_ptr<float>(), h.data_ptr<float>(),
                          g.numel());
  return {h, s};
}

struct SwiGLUFunction : torch::autograd::Function<SwiGLUFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& g, const torch::Tensor& u) {
    auto [h, s] = swiglu_values(g, u);
    ctx->save_for_backward({g, u, s});
    return h;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &g = saved[0], &u = saved[1], &s = saved[2];
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor()};
    auto dh = grads[0].contiguous();
    auto dg = torch::empty_like(g), du = torch::empty_like(u);
    if (g.scalar_type() == torch::kFloat64)
      swiglu_backward_kernel(dh.data_ptr<double>(), g.data_ptr<double>(), u.data_ptr<double>(), s.data_ptr<double>(),
                             dg.data_ptr<double>(), du.data_ptr<double>(), g.numel());
    else
      swiglu_backward_kernel(dh.data_ptr<float>(), g.data_ptr<float>(), u.data_ptr<float>(), s.data_ptr<float>(),
                             dg.data_ptr<float>(), du.data_ptr<float>(), g.numel());
    return {dg, du};
  }
};

}  // namespace

torch::Tensor swiglu(const torch::Tensor& g, const torch::Tensor& u) {
  const auto dt = g.scalar_type();
  const bool fused = g.device().is_cpu() && (dt == torch::kFloat32 || dt == torch::kFloat64) &&
                     u.scalar_type() == dt && u.device() == g.device() && g.sizes() == u.sizes();
  if (!fused) return torch::silu(g) * u;
  // Inference takes the same values without building a node, so a checkpointed layer's recompute
  // reproduces its first pass exactly.
  if (!torch::GradMode::is_enabled() || (!g.requires_grad() && !u.requires_grad()))
    return swiglu_values(g.contiguous(), u.contiguous()).first;
  return SwiGLUFunction::apply(g.contiguous(), u.contiguous());
}

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
    auto gate = gu.narrow(-1, 0, intermediate_), up = gu.narrow(-1, intermediate_, intermediate_);
    return down_proj(act_ == Activation::Silu ? swiglu(gate, up) : up * act(gate));
  }
  auto gu = lora_linear_group(x, {gate_proj.get(), up_proj.get()});  // (B, T, I) each
  auto h = act_ == Activation::Silu ? swiglu(gu[0], gu[1]) : act(gu[0]) * gu[1];  // (B, T, I)
  return down_proj(h);                                                          // (B, T, C)
}

}  // namespace grpo::model
