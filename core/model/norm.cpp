// RMSNorm: x * rsqrt(mean(x^2) + eps) computed in the accumulate dtype, then weight * x.
#include "core/model/norm.h"

#include <cmath>

#include <torch/torch.h>

#include "core/model/simd.h"

namespace grpo::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// RMSNorm in one autograd node, on the CPU in fp32 and fp64 (docs/formulas.md, "Fused nodes").
// Per row of C values, with w the weight (1 + weight for Gemma):
//   r = 1 / sqrt(mean(x^2) + eps),   y = w * x * r
//   dx = r * g - x * r^3 * mean(g * x),   g = w * dy,   dw = sum over rows of dy * x * r
// The composite takes five operators forward (pow, mean, add, rsqrt, two products) and about ten
// backward. Sums run in double. Both loops have an AVX2 copy (run_fast).
// sum over c < C of a[c] * b[c] (* w[c]), in double, in eight interleaved partial sums: one running
// sum is a chain of dependent additions (the latency of each, per element), and GCC may not reorder
// a floating-point sum into vectors by itself. Both copies of the loop add in the same order.
template <typename T>
GRPO_KERNEL_INLINE double dot_double(const T* a, const T* b, const T* w, int64_t C) {
  constexpr int64_t L = 8;
  double acc[L] = {};
  int64_t c = 0;
  for (; c + L <= C; c += L)
    for (int64_t j = 0; j < L; ++j)
      acc[j] += double(a[c + j]) * double(b[c + j]) * (w ? double(w[c + j]) : 1.0);
  double sum = 0;
  for (int64_t j = 0; j < L; ++j) sum += acc[j];
  for (; c < C; ++c) sum += double(a[c]) * double(b[c]) * (w ? double(w[c]) : 1.0);
  return sum;
}

template <typename T>
GRPO_KERNEL_INLINE void rms_forward(const T* x, const T* w, T* y, T* r, int64_t rows, int64_t C, double eps) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* xr = x + i * C;
    const double ss = dot_double<T>(xr, xr, nullptr, C);
    const T ri = T(1.0 / std::sqrt(ss / double(C) + eps));
    r[i] = ri;
    T* yr = y + i * C;
    for (int64_t c = 0; c < C; ++c) yr[c] = w[c] * (xr[c] * ri);
  }
}

// dx, and dw (summed over rows, in double) when dw is not null.
template <typename T>
GRPO_KERNEL_INLINE void rms_backward(const T* dy, const T* x, const T* w, const T* r, T* dx, double* dw, int64_t rows,
                                     int64_t C) {
  for (int64_t i = 0; i < rows; ++i) {
    const T *xr = x + i * C, *dyr = dy + i * C;
    const double dot = dot_double<T>(dyr, xr, w, C);
    const T ri = r[i], k = T(double(ri) * double(ri) * double(ri) * dot / double(C));
    T* dxr = dx + i * C;
    for (int64_t c = 0; c < C; ++c) dxr[c] = ri * (w[c] * dyr[c]) - xr[c] * k;
    if (dw)
      for (int64_t c = 0; c < C; ++c) dw[c] += double(dyr[c]) * double(xr[c] * ri);
  }
}

// y and the per-row r of contiguous x (rows, C) and w (C).
std::pair<torch::Tensor, torch::Tensor> rms_values(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  const int64_t C = x.size(-1), rows = C > 0 ? x.numel() / C : 0;
  auto y = torch::empty_like(x), r = torch::empty({rows}, x.options());
  with_float_type(x.scalar_type() == torch::kFloat64, [&](auto zero) {
    using T = decltype(zero);
    const T *xp = x.data_ptr<T>(), *wp = w.data_ptr<T>();
    T *yp = y.data_ptr<T>(), *rp = r.data_ptr<T>();
    run_fast([&]() GRPO_LAMBDA_INLINE { rms_forward(xp, wp, yp, rp, rows, C, eps); });
  });
  return {y, r};
}

struct RMSNormFunction : torch::autograd::Function<RMSNormFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w, double eps) {
    auto [y, r] = rms_values(x, w, eps);
    ctx->save_for_backward({x, w, r});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1], &r = saved[2];
    auto dy = grads[0].contiguous();
    auto dx = torch::empty_like(x);
    const int64_t C = x.size(-1), rows = C > 0 ? x.numel() / C : 0;
    torch::Tensor dw;  // a weight that trains (modules_to_save, full fine-tuning)
    if (ctx->needs_input_grad(1)) dw = torch::zeros({C}, x.options().dtype(torch::kFloat64));
    double* dwp = dw.defined() ? dw.data_ptr<double>() : nullptr;
    with_float_type(x.scalar_type() == torch::kFloat64, [&](auto zero) {
      using T = decltype(zero);
      const T *dyp = dy.data_ptr<T>(), *xp = x.data_ptr<T>(), *wp = w.data_ptr<T>(), *rp = r.data_ptr<T>();
      T* dxp = dx.data_ptr<T>();
      run_fast([&]() GRPO_LAMBDA_INLINE { rms_backward(dyp, xp, wp, rp, dxp, dwp, rows, C); });
    });
    return {dx, dw.defined() ? dw.to(w.scalar_type()) : torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

RMSNormImpl::RMSNormImpl(const RMSNormOptions& options) : eps_(options.eps()), offset_one_(options.offset_one()) {
  weight = register_parameter(
      "weight", torch::full({options.dim()}, neutral_weight(),
                            torch::TensorOptions().dtype(options.dtype()).device(options.device())));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  auto in_dtype = x.scalar_type();
  // The fused node where it applies (a CPU, fp32 or fp64), whether the weight trains or not, so a
  // model's outputs do not depend on which of its parameters train; no node at all without a
  // gradient, with the same arithmetic, so a checkpointed recompute matches.
  if (x.device().is_cpu() && (in_dtype == torch::kFloat32 || in_dtype == torch::kFloat64) &&
      weight.scalar_type() == in_dtype && x.size(-1) == weight.size(0)) {
    if (!torch::GradMode::is_enabled() || (!x.requires_grad() && !weight.requires_grad())) {
      torch::NoGradGuard ng;
      return rms_values(x.contiguous(), offset_one_ ? (weight + 1.0) : weight.contiguous(), eps_).first;
    }
    return RMSNormFunction::apply(x.contiguous(), offset_one_ ? (weight + 1.0) : weight.contiguous(), eps_);
  }
  auto h = x.to(accumulate_dtype(in_dtype));                    // (..., dim)
  auto inv_rms = torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true).add_(eps_));  // (..., 1)
  if (offset_one_) return ((h * inv_rms) * (weight.to(h.scalar_type()) + 1.0)).to(in_dtype);
  return weight * (h * inv_rms).to(in_dtype);
}

}  // namespace grpo::model
