// RoPE: transformers' _compute_default_rope_parameters / _compute_llama3_parameters and
// LlamaRotaryEmbedding.forward + apply_rotary_pos_emb, op for op in fp32.
#include "core/model/rope.h"

#include <cmath>

#include <torch/torch.h>

#include "core/common/error.h"

namespace grpo::model {

torch::Tensor rope_inv_freq(const io::ModelConfig& c) {
  const int64_t dim = c.head_dim;
  // inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
  auto exponent = torch::arange(0, dim, 2, torch::kInt64).to(torch::kFloat32) / double(dim);
  auto inv_freq = torch::pow(c.rope_theta, exponent).reciprocal();  // (D/2)
  if (!c.rope_scaling || c.rope_scaling->rope_type == "default" || c.rope_scaling->rope_type.empty())
    return inv_freq;
  const auto& s = *c.rope_scaling;
  check(s.rope_type == "llama3", "config.json", "rope_scaling.rope_type '" + s.rope_type + "' is not supported",
        "supported: default, llama3");
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

RopeTables rope_tables(const torch::Tensor& inv_freq, const torch::Tensor& position_ids,
                       torch::Dtype dtype) {
  auto pos = position_ids.to(torch::kFloat32);  // (B, T)
  auto freqs = pos.unsqueeze(-1) * inv_freq.to(pos.device()).view({1, 1, -1});  // (B, T, D/2)
  auto emb = torch::cat({freqs, freqs}, -1);                                     // (B, T, D)
  return {emb.cos().to(dtype).unsqueeze(2), emb.sin().to(dtype).unsqueeze(2)};  // (B, T, 1, D)
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& t) {
  const int64_t half = x.size(-1) / 2;
  auto x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);  // (B, T, H, D/2)
  auto rotated = torch::cat({-x2, x1}, -1);                           // (B, T, H, D)
  return x * t.cos + rotated * t.sin;
}

}  // namespace grpo::model
