// LoraLinear: base linear + optional LoRA adapter, computed on 2D views; one autograd node per input
// for the projections that share it.
#include "core/model/lora_linear.h"

#include <cmath>
#include <vector>

#include <torch/torch.h>

namespace grpo::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x W^T (+ bias): (N, out).
torch::Tensor base_product(const torch::Tensor& x2, const torch::Tensor& weight, const torch::Tensor& bias) {
  return bias.defined() ? torch::addmm(bias, x2, weight.t()) : torch::mm(x2, weight.t());
}

// Whether a group's products take each adapter folded into its base weight, W' = W + s B A
// (docs/formulas.md, "Fused nodes"): only where W' keeps the adapter's precision (the compute dtype
// is fp32 or fp64, as A and B are) and where it does less work: building W' costs 2 r in out per
// projection, in the forward and again in the backward, and saves the h B^T and G A products,
// 2 N r (in + out). Taken at N (in + out) >= 4 in out, summed over the group.
bool merge_products(int64_t rows, torch::ScalarType dt, torch::TensorList W) {
  if (dt != torch::kFloat32 && dt != torch::kFloat64) return false;
  double saved = 0, cost = 0;
  for (const auto& w : W) {
    saved += double(rows) * double(w.size(0) + w.size(1));
    cost += 4.0 * double(w.size(0)) * double(w.size(1));
  }
  return saved >= cost;
}

// W'_i = W_i + s_i B_i A_i, with A_i block i of the stacked A: (out, in).
torch::Tensor merged_weight(const torch::Tensor& W, const torch::Tensor& B, const torch::Tensor& Acat, int64_t off,
                            double scaling) {
  return torch::addmm(W, B, Acat.narrow(0, off, B.size(1)), 1.0, scaling);
}

// The values of a group of LoRA projections of one input x (N, in), shared by the node and the
// no-grad path so both give the same values bit for bit (a checkpointed layer's recompute runs the
// node where its first pass, without a gradient, ran this directly):
//   H   = x [A_0; ...; A_{n-1}]^T, block i scaled by s_i       (N, sum r_i): h_i = s_i x A_i^T
//   y_i = x W_i^T (+ b_i) + h_i B_i^T     or, merged,   y_i = x W'_i^T (+ b_i)
// A and B arrive in the compute dtype. H is left undefined where nothing needs it (merged, no grad).
struct GroupValues {
  variable_list y;
  torch::Tensor H;
};
GroupValues group_values(const torch::Tensor& x2, torch::TensorList W, torch::TensorList bias, const torch::Tensor& Acat,
                         torch::TensorList B, const std::vector<double>& scalings, bool merged, bool keep_h) {
  GroupValues v;
  if (!merged || keep_h) v.H = torch::mm(x2, Acat.t());
  int64_t off = 0;
  for (size_t i = 0; i < W.size(); ++i) {
    const int64_t r = B[i].size(1);
    const auto b = bias.empty() ? torch::Tensor() : bias[i];
    if (v.H.defined()) v.H.narrow(1, off, r).mul_(scalings[i]);
    if (merged) {
      v.y.push_back(base_product(x2, merged_weight(W[i], B[i], Acat, off, scalings[i]), b));
    } else {
      v.y.push_back(base_product(x2, W[i], b).addmm_(v.H.narrow(1, off, r), B[i].t()));
    }
    off += r;
  }
  return v;
}

// A of each layer in the compute dtype, stacked: (sum r_i, in); B of each in the compute dtype.
torch::Tensor stacked(torch::TensorList A, torch::ScalarType dt) {
  if (A.size() == 1) return A[0].to(dt);
  std::vector<torch::Tensor> parts;
  for (const auto& a : A) parts.push_back(a.to(dt));
  return torch::cat(parts);
}
std::vector<torch::Tensor> in_dtype(torch::TensorList B, torch::ScalarType dt) {
  std::vector<torch::Tensor> out;
  for (const auto& b : B) out.push_back(b.to(dt));
  return out;
}

// The projections of one input with frozen bases and no dropout, as one autograd node
// (docs/formulas.md, "Fused nodes"). With G the (N, sum r_i) gradient of x Acat^T, block
// i = s_i dy_i B_i (zero where y_i has no gradient):
//   dx   = sum_i dy_i W_i + G Acat      or, merged,   dx = sum_i dy_i W'_i (W'_i built again)
//   dA_i = block i of G^T x             one product for every A
//   dB_i = dy_i^T h_i
// dx is written once: there is no sum of per-projection or base-and-adapter gradients. The
// composite (mm, t, mul_, addmm_, casts) takes about ten autograd nodes per projection.
// Inputs: x, then the W's, A's, B's and biases as lists (LibTorch gives each tensor its own edge),
// then the scalings; A and B come back in their own dtype (fp32 under bf16 compute).
struct LoraLinearFunction : torch::autograd::Function<LoraLinearFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x2, torch::TensorList W, torch::TensorList A,
                               torch::TensorList B, torch::TensorList bias, std::vector<double> scalings) {
    const auto dt = x2.scalar_type();
    const bool merged = merge_products(x2.size(0), dt, W);
    auto Acat = stacked(A, dt);
    auto Bt = in_dtype(B, dt);
    auto v = group_values(x2, W, bias, Acat, Bt, scalings, merged, /*keep_h=*/true);
    variable_list saved{x2, Acat, v.H};
    saved.insert(saved.end(), W.begin(), W.end());
    saved.insert(saved.end(), Bt.begin(), Bt.end());
    ctx->save_for_backward(saved);
    ctx->set_materialize_grads(false);  // an output without a gradient arrives undefined, not as zeros
    ctx->saved_data["scalings"] = scalings;
    ctx->saved_data["merged"] = merged;
    ctx->saved_data["a_dtype"] = static_cast<int64_t>(A[0].scalar_type());
    ctx->saved_data["b_dtype"] = static_cast<int64_t>(B[0].scalar_type());
    ctx->saved_data["biases"] = static_cast<int64_t>(bias.size());
    return v.y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &x2 = saved[0], &Acat = saved[1], &H = saved[2];
    const auto scalings = ctx->saved_data["scalings"].toDoubleVector();
    const bool merged = ctx->saved_data["merged"].toBool();
    const size_t n = scalings.size(), n_bias = size_t(ctx->saved_data["biases"].toInt());
    const auto a_dtype = static_cast<torch::ScalarType>(ctx->saved_data["a_dtype"].toInt());
    const auto b_dtype = static_cast<torch::ScalarType>(ctx->saved_data["b_dtype"].toInt());
    auto W = [&](size_t i) -> const torch::Tensor& { return saved[3 + i]; };
    auto B = [&](size_t i) -> const torch::Tensor& { return saved[3 + n + i]; };
    // Edges: x, W_0..n-1, A_0..n-1, B_0..n-1, the biases; the scalings take one more slot.
    variable_list out(1 + 3 * n + n_bias + 1);
    bool any = false;
    for (const auto& g : grads) any = any || g.defined();
    if (!any) return out;
    auto G = torch::empty({x2.size(0), Acat.size(0)}, x2.options());  // (N, sum r_i)
    int64_t off = 0;
    for (size_t i = 0; i < n; ++i) {
      auto Gi = G.narrow(1, off, B(i).size(1));
      if (grads[i].defined())
        torch::mm_out(Gi, grads[i], B(i)).mul_(scalings[i]);
      else
        Gi.zero_();
      off += B(i).size(1);
    }
    if (ctx->needs_input_grad(0)) {
      torch::Tensor dx;  // (N, in)
      off = 0;
      for (size_t i = 0; i < n; ++i) {
        const int64_t r = B(i).size(1);
        if (grads[i].defined()) {
          const auto Wi = merged ? merged_weight(W(i), B(i), Acat, off, scalings[i]) : W(i);
          dx = dx.defined() ? dx.addmm_(grads[i], Wi) : torch::mm(grads[i], Wi);
        }
        off += r;
      }
      out[0] = merged ? dx : dx.addmm_(G, Acat);
    }
    bool a_grad = false;
    for (size_t i = 0; i < n; ++i) a_grad = a_grad || ctx->needs_input_grad(1 + n + i);
    auto dAcat = a_grad ? torch::mm(G.t(), x2) : torch::Tensor();  // (sum r_i, in)
    off = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t r = B(i).size(1);
      // Copies, so no parameter's gradient is a view into another's.
      if (ctx->needs_input_grad(1 + n + i))
        out[1 + n + i] = n == 1 ? dAcat.to(a_dtype) : dAcat.narrow(0, off, r).to(a_dtype, false, true);
      if (ctx->needs_input_grad(1 + 2 * n + i) && grads[i].defined())  // undefined: no gradient reaches B_i
        out[1 + 2 * n + i] = torch::mm(grads[i].t(), H.narrow(1, off, r)).to(b_dtype);
      off += r;
    }
    return out;
  }
};

// A layer that can join the node: an adapter that forward adds, no dropout to apply, and a frozen
// base where a backward will run.
bool fusable(const LoraLinearImpl& l, bool backward) {
  if (!l.adapter_active() || (l.lora_dropout() > 0.0 && l.is_training())) return false;
  return !backward || (!l.weight.requires_grad() && !(l.bias.defined() && l.bias.requires_grad()));
}

// Whether a backward will reach the layers' adapters or their input.
bool needs_backward(const torch::Tensor& x, const std::vector<LoraLinearImpl*>& layers) {
  if (!torch::GradMode::is_enabled()) return false;
  bool any = x.requires_grad();
  for (const auto* l : layers)
    any = any || (l->has_lora() && (l->lora_A->weight.requires_grad() || l->lora_B->weight.requires_grad()));
  return any;
}

}  // namespace

std::vector<torch::Tensor> lora_linear_group(const torch::Tensor& x, const std::vector<LoraLinearImpl*>& layers) {
  std::vector<torch::Tensor> ys;
  if (layers.empty()) return ys;
  const bool backward = needs_backward(x, layers);
  const auto& first = *layers[0];
  const int64_t in = first.options().in_features();
  bool together = true;
  for (const auto* l : layers)
    together = together && fusable(*l, backward) && l->options().in_features() == in &&
               l->weight.scalar_type() == first.weight.scalar_type() && l->weight.device() == first.weight.device() &&
               l->bias.defined() == first.bias.defined() &&
               l->lora_A->weight.scalar_type() == first.lora_A->weight.scalar_type() &&
               l->lora_B->weight.scalar_type() == first.lora_B->weight.scalar_type();
  if (!together) {
    for (auto* l : layers) ys.push_back(layers.size() == 1 ? l->forward_composite(x) : l->forward(x));
    return ys;
  }
  std::vector<torch::Tensor> W, A, B, bias;
  std::vector<double> scalings;
  for (auto* l : layers) {
    W.push_back(l->weight);
    A.push_back(l->lora_A->weight);
    B.push_back(l->lora_B->weight);
    if (l->bias.defined()) bias.push_back(l->bias);
    scalings.push_back(l->lora_scaling());
  }
  auto x2 = x.reshape({-1, in});  // (N, in)
  if (backward) {
    ys = LoraLinearFunction::apply(x2, torch::TensorList(W), torch::TensorList(A), torch::TensorList(B),
                                   torch::TensorList(bias), scalings);
  } else {
    const auto dt = x.scalar_type();
    ys = group_values(x2, W, bias, stacked(A, dt), in_dtype(B, dt), scalings, merge_products(x2.size(0), dt, W),
                      /*keep_h=*/false)
             .y;
  }
  auto sizes = x.sizes().vec();
  for (size_t i = 0; i < ys.size(); ++i) {
    sizes.back() = layers[i]->options().out_features();
    ys[i] = ys[i].view(sizes);
  }
  return ys;
}

bool lora_group_merges(int64_t rows, torch::ScalarType dtype, const std::vector<LoraLinearImpl*>& layers) {
  std::vector<torch::Tensor> W;
  for (const auto* l : layers) W.push_back(l->weight);
  return merge_products(rows, dtype, W);
}

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

torch::Tensor LoraLinearImpl::forward(const torch::Tensor& x) { return lora_linear_group(x, {this})[0]; }

torch::Tensor LoraLinearImpl::forward_composite(const torch::Tensor& x) {
  const int64_t in = options_.in_features(), out = options_.out_features();
  auto sizes = x.sizes().vec();
  auto x2 = x.reshape({-1, in});             // (N, in)
  auto y2 = base_product(x2, weight, bias);  // (N, out)
  if (adapter_active()) {
    auto xa = dropout_ > 0.0 && is_training() ? torch::dropout(x2, dropout_, /*train=*/true) : x2;
    const auto dt = x.scalar_type();
    auto h = torch::mm(xa, lora_A->weight.to(dt).t()).mul_(scaling_);  // (N, r)
    y2.addmm_(h, lora_B->weight.to(dt).t());
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
