// RoPE: transformers' modeling_rope_utils (_compute_*_parameters for each rope type) and
// LlamaRotaryEmbedding.forward + apply_rotary_pos_emb, op for op in fp32.
#include "core/model/rope.h"

#include <algorithm>
#include <cmath>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/model/simd.h"

namespace grpo::model {

namespace {

// arange(0, dim, 2).float() / dim: the exponents every rope type raises its base to.
torch::Tensor rope_exponents(int64_t dim) {
  return torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / double(dim);  // (dim/2)
}

// 1 / base^(arange(0, dim, 2) / dim), as _compute_default_rope_parameters.
torch::Tensor default_inv_freq(double base, int64_t dim) {
  return torch::pow(base, rope_exponents(dim)).reciprocal();  // (dim/2)
}

bool scaled(const io::ModelConfig& c, RopeKind kind) {
  return kind == RopeKind::Global && c.rope_scaling && !c.rope_scaling->rope_type.empty() &&
         c.rope_scaling->rope_type != "default";
}

double base_of(const io::ModelConfig& c, RopeKind kind) {
  return kind == RopeKind::Local && c.rope_local_base_freq ? *c.rope_local_base_freq : c.rope_theta;
}

torch::Tensor llama3_inv_freq(const torch::Tensor& inv_freq, const io::RopeScaling& s) {
  const double factor = s.factor, lo = s.low_freq_factor, hi = s.high_freq_factor;
  const double old_ctx = double(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
  // Python's scalar / tensor is tensor.reciprocal() * scalar; mirrored for bit-equality.
  auto wavelen = inv_freq.reciprocal() * (2 * M_PI);
  auto inv_freq_llama = torch::where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq);
  auto smooth = (wavelen.reciprocal() * old_ctx - lo) / (hi - lo);
  auto smoothed = (1 - smooth) * inv_freq_llama / factor + smooth * inv_freq_llama;
  auto is_medium = (wavelen < high_freq_wavelen).logical_not() & (wavelen > low_freq_wavelen).logical_not();
  return torch::where(is_medium, smoothed, inv_freq_llama);
}

double yarn_mscale(double scale, double mscale = 1.0) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// _compute_yarn_parameters: blend interpolated and extrapolated frequencies over a linear ramp
// between the dims that rotate beta_fast and beta_slow times in the original context.
torch::Tensor yarn_inv_freq(double base, int64_t dim, const io::RopeScaling& s) {
  const double factor = s.factor, original = double(s.original_max_position_embeddings);
  auto correction_dim = [&](double rotations) {
    return (double(dim) * std::log(original / (rotations * 2 * M_PI))) / (2 * std::log(base));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a singularity
  auto pos_freqs = torch::pow(base, rope_exponents(dim));
  auto extrapolation = pos_freqs.reciprocal();
  auto interpolation = (pos_freqs * factor).reciprocal();
  auto ramp = ((torch::arange(dim / 2, torch::kFloat32) - low) / (high - low)).clamp(0, 1);
  auto extrapolation_factor = 1 - ramp;
  return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
}

// longrope's pretrained context and its extension factor: Phi-3 keeps the pretrained context
// outside rope_scaling and derives the factor from max_position_embeddings over it.
double longrope_factor(const io::ModelConfig& c, const io::RopeScaling& s) {
  const double original = double(s.original_max_position_embeddings);
  return original > 0 && original != double(c.max_position_embeddings)
             ? double(c.max_position_embeddings) / original
             : s.factor;
}

}  // namespace

bool rope_depends_on_length(const io::ModelConfig& c, RopeKind kind) {
  return scaled(c, kind) && (c.rope_scaling->rope_type == "dynamic" || c.rope_scaling->rope_type == "longrope");
}

torch::Tensor rope_inv_freq(const io::ModelConfig& c, RopeKind kind, int64_t max_position) {
  const int64_t dim = c.rotary_dim();
  const double base = base_of(c, kind);
  if (!scaled(c, kind)) return default_inv_freq(base, dim);
  const auto& s = *c.rope_scaling;
  const int64_t seq_len = max_position + 1;  // 0 at init
  if (s.rope_type == "linear") return default_inv_freq(base, dim) / s.factor;
  if (s.rope_type == "llama3") return llama3_inv_freq(default_inv_freq(base, dim), s);
  if (s.rope_type == "yarn") return yarn_inv_freq(base, dim, s);
  if (s.rope_type == "dynamic") {
    // _compute_dynamic_ntk_parameters: NTK-scaled base once the call's length exceeds the
    // pretrained context.
    const double original = double(s.original_max_position_embeddings);
    if (double(seq_len) <= original) return default_inv_freq(base, dim);
    const double scaled_base =
        base * std::pow((s.factor * double(seq_len) / original) - (s.factor - 1), double(dim) / double(dim - 2));
    return default_inv_freq(scaled_base, dim);
  }
  if (s.rope_type == "longrope") {
    const auto& ext = seq_len > s.original_max_position_embeddings ? s.long_factor : s.short_factor;
    check(ext.size() == size_t(dim / 2), "config.json", "rope_scaling: longrope factor lists must have rotary_dim / 2 entries");
    auto factors = torch::tensor(std::vector<float>(ext.begin(), ext.end()), torch::kFloat32);
    return (factors * torch::pow(base, rope_exponents(dim))).reciprocal();
  }
  throw Error("config.json", "rope_scaling.rope_type '" + s.rope_type + "' is not supported",
              "supported: default, linear, dynamic, yarn, longrope, llama3");
}

double rope_attention_scaling(const io::ModelConfig& c, RopeKind kind) {
  if (!scaled(c, kind)) return 1.0;
  const auto& s = *c.rope_scaling;
  if (s.attention_factor && (s.rope_type == "yarn" || s.rope_type == "longrope")) return *s.attention_factor;
  if (s.rope_type == "yarn") {
    if (s.mscale && s.mscale_all_dim && *s.mscale != 0 && *s.mscale_all_dim != 0)
      return yarn_mscale(s.factor, *s.mscale) / yarn_mscale(s.factor, *s.mscale_all_dim);
    return yarn_mscale(s.factor);
  }
  if (s.rope_type == "longrope") {
    const double factor = longrope_factor(c, s), original = double(s.original_max_position_embeddings);
    return factor <= 1.0 ? 1.0 : std::sqrt(1 + std::log(factor) / std::log(original));
  }
  return 1.0;
}

RopeTables rope_tables(const torch::Tensor& inv_freq, const torch::Tensor& position_ids,
                       torch::Dtype dtype, double attention_scaling) {
  auto pos = position_ids.to(torch::kFloat32);  // (B, T)
  auto freqs = pos.unsqueeze(-1) * inv_freq.to(pos.device()).view({1, 1, -1});  // (B, T, R/2)
  auto emb = torch::cat({freqs, freqs}, -1);                                     // (B, T, R)
  auto cos = emb.cos(), sin = emb.sin();
  if (attention_scaling != 1.0) {
    cos = cos * attention_scaling;
    sin = sin * attention_scaling;
  }
  return {cos.to(dtype).unsqueeze(2), sin.to(dtype).unsqueeze(2)};  // (B, T, 1, R)
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rotate-half RoPE over whole heads in one autograd node, on the CPU in fp32 and fp64
// (docs/formulas.md, "Fused nodes"). Per head of D dims, half = D / 2, with c and s the token's
// cos and sin rows:
//   y_d  = x_d c_d - x_{d+half} s_d          (d < half)
//   y_d  = x_d c_d + x_{d-half} s_d          (d >= half)
//   dx_d = dy_d c_d + dy_{d+half} s_{d+half}  (d < half)
//   dx_d = dy_d c_d - dy_{d-half} s_{d-half}  (d >= half)
// The composite takes five operators forward (two narrows, a negation, a concatenation, the two
// products and their sum) and as many backward. x (B, T, H, D); cos and sin (B or 1, T, 1, D).
template <typename T>
void rope_rows(const T* x, const T* cos, const T* sin, T* y, int64_t B, int64_t Tn, int64_t H, int64_t D,
               bool table_batch, bool backward) {
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tn; ++t) {
      const int64_t row = (table_batch ? b * Tn : 0) + t;
      const T *c = cos + row * D, *s = sin + row * D;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t off = ((b * Tn + t) * H + h) * D;
        const T* xr = x + off;
        T* yr = y + off;
        if (!backward) {
          for (int64_t d = 0; d < half; ++d) yr[d] = xr[d] * c[d] - xr[d + half] * s[d];
          for (int64_t d = half; d < D; ++d) yr[d] = xr[d] * c[d] + xr[d - half] * s[d];
        } else {
          for (int64_t d = 0; d < half; ++d) yr[d] = xr[d] * c[d] + xr[d + half] * s[d + half];
          for (int64_t d = half; d < D; ++d) yr[d] = xr[d] * c[d] - xr[d - half] * s[d - half];
        }
      }
    }
}

// The rotation (backward: its transpose) of contiguous x by contiguous tables.
torch::Tensor rope_apply(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin, bool backward) {
  auto y = torch::empty_like(x);
  const bool table_batch = cos.size(0) != 1;
  with_float_type(x.scalar_type() == torch::kFloat64, [&](auto zero) {
    using T = decltype(zero);
    rope_rows(x.data_ptr<T>(), cos.data_ptr<T>(), sin.data_ptr<T>(), y.data_ptr<T>(), x.size(0), x.size(1), x.size(2),
              x.size(3), table_batch, backward);
  });
  return y;
}

struct RopeFunction : torch::autograd::Function<RopeFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return rope_apply(x, cos, sin, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    auto saved = ctx->get_saved_variables();
    return {rope_apply(grads[0].contiguous(), saved[0], saved[1], true), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& t) {
  const int64_t rot = t.cos.size(-1);
  const auto dt = x.scalar_type();
  // The fused node where it applies: a CPU, fp32 or fp64, whole heads rotated, tables of x's dtype
  // laid out (B or 1, T, 1, D). No node without a gradient, with the same arithmetic.
  if (x.dim() == 4 && x.device().is_cpu() && (dt == torch::kFloat32 || dt == torch::kFloat64) && rot == x.size(-1) &&
      rot % 2 == 0 && t.cos.scalar_type() == dt && t.sin.scalar_type() == dt && t.cos.dim() == 4 &&
      t.cos.sizes() == t.sin.sizes() && (t.cos.size(0) == 1 || t.cos.size(0) == x.size(0)) &&
      t.cos.size(1) == x.size(1) && t.cos.size(2) == 1 && !t.cos.requires_grad() && !t.sin.requires_grad()) {
    auto cos = t.cos.contiguous(), sin = t.sin.contiguous();
    if (!torch::GradMode::is_enabled() || !x.requires_grad()) return rope_apply(x.contiguous(), cos, sin, false);
    return RopeFunction::apply(x.contiguous(), cos, sin);
  }
  if (rot < x.size(-1)) {  // partial rotary: rotate the first `rot` dims, pass the rest through
    auto rotated = apply_rope(x.narrow(-1, 0, rot), t);
    return torch::cat({rotated, x.narrow(-1, rot, x.size(-1) - rot)}, -1);
  }
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);  // (B, T, H, D/2)
  auto rotated = torch::cat({-x2, x1}, -1);                           // (B, T, H, D)
  return x * t.cos + rotated * t.sin;
}

}  // namespace grpo::model
