// SwiGLU MLP (hidden_act "silu"); GeGLU for Gemma.
#include "core/model/mlp.h"

#include <cmath>

#include <torch/torch.h>

#include "core/model/simd.h"

namespace grpo::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// silu(g) * u in one autograd node (docs/formulas.md, "Fused nodes"): one pass forward that
// reads g and u and writes h, and one backward that reads dh, g and u and writes dg and du. The
// logistic s = sigmoid(g) is evaluated in both, a vector at a time (simd.h), rather than kept:
//   h = g * s * u,   du = dh * g * s,   dg = dh * u * (s + g * s * (1 - s)).
// The composite evaluates sigmoid twice (silu, then silu_backward) and makes three more passes for
// the product and its two gradients. Both loops have an AVX2 copy (run_fast).
GRPO_KERNEL_INLINE float sigmoid_of(float g) { return sigmoid_float(g); }
GRPO_KERNEL_INLINE double sigmoid_of(double g) { return 1.0 / (1.0 + std::exp(-g)); }

template <typename T>
GRPO_KERNEL_INLINE void swiglu_forward_kernel(const T* __restrict g, const T* __restrict u, T* __restrict h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = g[i] * sigmoid_of(g[i]) * u[i];
}

template <typename T>
GRPO_KERNEL_INLINE void swiglu_backward_kernel(const T* __restrict dh, const T* __restrict g, const T* __restrict u,
                                               T* __restrict dg, T* __restrict du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T s = sigmoid_of(g[i]), gs = g[i] * s;
    du[i] = dh[i] * gs;
    dg[i] = dh[i] * u[i] * (s + gs * (T(1) - s));
  }
}

// h = silu(g) * u for contiguous fp32 or fp64 g and u of one shape.
torch::Tensor swiglu_values(const torch::Tensor& g, const torch::Tensor& u) {
  auto h = torch::empty_like(g);
  const int64_t n = g.numel();
  with_float_type(g.scalar_type() == torch::kFloat64, [&](auto zero) {
    using T = decltype(zero);
    const T *gp = g.data_ptr<T>(), *up = u.data_ptr<T>();
    T* hp = h.data_ptr<T>();
    run_fast([&]() GRPO_LAMBDA_INLINE { swiglu_forward_kernel(gp, up, hp, n); });
  });
  return h;
}

struct SwiGLUFunction : torch::autograd::Function<SwiGLUFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& g, const torch::Tensor& u) {
    ctx->save_for_backward({g, u});
    return swiglu_values(g, u);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &g = saved[0], &u = saved[1];
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor()};
    auto dh = grads[0].contiguous();
    auto dg = torch::empty_like(g), du = torch::empty_like(u);
    const int64_t n = g.numel();
    with_float_type(g.scalar_type() == torch::kFloat64, [&](auto zero) {
      using T = decltype(zero);
      const T *dhp = dh.data_ptr<T>(), *gp = g.data_ptr<T>(), *up = u.data_ptr<T>();
      T *dgp = dg.data_ptr<T>(), *dup = du.data_ptr<T>();
      run_fast([&]() GRPO_LAMBDA_INLINE { swiglu_backward_kernel(dhp, gp, up, dgp, dup, n); });
    });
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
    return swiglu_values(g.contiguous(), u.contiguous());
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
