// LoraLinear: base linear + optional LoRA adapter, computed on 2D views with fused addmm.
#include "core/model/lora_linear.h"

#include <cmath>

#include <torch/torch.h>

namespace grpo::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x W^T (+ bias): (N, out).
torch::Tensor base_product(const torch::Tensor& x2, const torch::Tensor& weight, const torch::Tensor& bias) {
  return bias.defined() ? torch::addmm(bias, x2, weight.t()) : torch::mm(x2, weight.t());
}

// y += h B^T with h = s * xa A^T, scaled while small; returns h (N, r). The fused node and the plain
// path both take it, so they give the same values bit for bit (a checkpointed layer's recompute
// runs the node where its first pass, without a gradient, ran the plain path).
torch::Tensor add_adapter_product(torch::Tensor& y, const torch::Tensor& xa, const torch::Tensor& A,
                                  const torch::Tensor& B, double scaling) {
  auto h = torch::mm(xa, A.t()).mul_(scaling);
  y.addmm_(h, B.t());
  return h;
}

// y = x W^T (+ bias) + s (x A^T) B^T with a frozen base, as one autograd node (docs/formulas.md,
// "Fused nodes"). The backward writes the input's gradient once,
// dx = dy W + (s dy B) A, with the adapter's part added in place, and gives A and B theirs:
//   dB = dy^T h with h = s x A^T,   dA = (s dy B)^T x.
// The composite (mm, t, mul_, addmm_, casts) takes about ten autograd nodes and one more pass over
// dx to sum the base's and the adapter's gradients.
struct LoraLinearFunction : torch::autograd::Function<LoraLinearFunction> {
  // The bias goes last among the tensors and as an optional, so the edges of x2, weight, A and B are
  // 0 to 3 with or without it.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x2, const torch::Tensor& weight,
                               const torch::Tensor& A, const torch::Tensor& B, const c10::optional<torch::Tensor>& bias,
                               double scaling) {
    const auto dt = x2.scalar_type();
    auto At = A.to(dt), Bt = B.to(dt);                                        // (r, in), (out, r)
    auto y = base_product(x2, weight, bias ? *bias : torch::Tensor());                // (N, out)
    auto h = add_adapter_product(y, x2, At, Bt, scaling);                          // (N, r)
    ctx->save_for_backward({x2, weight, At, Bt, h});
    ctx->saved_data["scaling"] = scaling;
    ctx->saved_data["a_dtype"] = static_cast<int64_t>(A.scalar_type());
    ctx->saved_data["b_dtype"] = static_cast<int64_t>(B.scalar_type());
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &weight = saved[1], &At = saved[2], &Bt = saved[3], &h = saved[4];
    const double scaling = ctx->saved_data["scaling"].toDouble();
    const auto& dy = grads[0];  // (N, out)
    torch::Tensor dx, dA, dB;
    if (!dy.defined()) return {dx, {}, dA, dB, {}, {}};
    auto dhs = torch::mm(dy, Bt).mul_(scaling);  // (N, r): the gradient of x A^T
    if (ctx->needs_input_grad(0)) dx = torch::mm(dy, weight).addmm_(dhs, At);  // (N, in)
    if (ctx->needs_input_grad(2))
      dA = torch::mm(dhs.t(), x2).to(static_cast<torch::ScalarType>(ctx->saved_data["a_dtype"].toInt()));  // (r, in)
    if (ctx->needs_input_grad(3))
      dB = torch::mm(dy.t(), h).to(static_cast<torch::ScalarType>(ctx->saved_data["b_dtype"].toInt()));  // (out, r)
    return {dx, {}, dA, dB, {}, {}};
  }
};

}  // namespace

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
  const bool lora = has_lora() && enabled_ && !merged_;
  const bool dropout = dropout_ > 0.0 && is_training();
  // The fused node only where a backward will run; inference (generation, log-probs without a
  // gradient) takes the same products below without building a node per call.
  const bool backward =
      torch::GradMode::is_enabled() &&
      (x.requires_grad() || (lora && (lora_A->weight.requires_grad() || lora_B->weight.requires_grad())));
  if (lora && backward && !dropout && !weight.requires_grad() && !(bias.defined() && bias.requires_grad())) {
    sizes.back() = out;
    const auto b = bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
    return LoraLinearFunction::apply(x2, weight, lora_A->weight, lora_B->weight, b, scaling_).view(sizes);
  }
  auto y2 = base_product(x2, weight, bias);  // (N, out)
  if (lora) {
    auto xa = dropout ? torch::dropout(x2, dropout_, /*train=*/true) : x2;
    const auto dt = x.scalar_type();
    add_adapter_product(y2, xa, lora_A->weight.to(dt), lora_B->weight.to(dt), scaling_);  // A (r, in), B (out, r)
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
