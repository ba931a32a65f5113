// Attention: projections -> (q/k norm) -> RoPE -> KV cache -> masked attention -> o_proj.
#include "core/model/attention.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>
#include <torch/version.h>

#include "core/model/kv_cache.h"

namespace grpo::model {

AttentionImpl::AttentionImpl(const AttentionOptions& o)
    : layer_index_(o.layer_index()),
      num_heads_(o.config().num_attention_heads),
      num_kv_heads_(o.config().num_key_value_heads),
      head_dim_(o.config().head_dim) {
  const auto& c = o.config();
  const bool qkv_bias = c.model_type == "qwen2" || c.attention_bias;
  const bool o_bias = c.model_type != "qwen2" && c.attention_bias;  // llama: attention_bias covers o
  auto lin = [&](int64_t in, int64_t out, bool bias) {
    return LoraLinear(LoraLinearOptions(in, out).bias(bias).dtype(o.dtype()).device(o.device()));
  };
  q_proj = register_module("q_proj", lin(c.hidden_size, c.q_dim(), qkv_bias));
  k_proj = register_module("k_proj", lin(c.hidden_size, c.kv_dim(), qkv_bias));
  v_proj = register_module("v_proj", lin(c.hidden_size, c.kv_dim(), qkv_bias));
  o_proj = register_module("o_proj", lin(c.q_dim(), c.hidden_size, o_bias));
  if (c.qk_norm || c.model_type == "qwen3") {
    auto n = RMSNormOptions(head_dim_).eps(c.rms_norm_eps).dtype(o.dtype()).device(o.device());
    q_norm = register_module("q_norm", RMSNorm(n));
    k_norm = register_module("k_norm", RMSNorm(n));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const RopeTables& rope,
                                     const AttentionMask& mask, KVCache* cache) {
  const int64_t B = x.size(0), T = x.size(1);
  auto q = q_proj(x).view({B, T, num_heads_, head_dim_});     // (B, T, H, D)
  auto k = k_proj(x).view({B, T, num_kv_heads_, head_dim_});  // (B, T, KVH, D)
  auto v = v_proj(x).view({B, T, num_kv_heads_, head_dim_});  // (B, T, KVH, D)
  if (!q_norm.is_empty()) {
    q = q_norm(q);
    k = k_norm(k);
  }
  q = apply_rope(q, rope).transpose(1, 2);  // (B, H, T, D)
  k = apply_rope(k, rope).transpose(1, 2);  // (B, KVH, T, D)
  v = v.transpose(1, 2);                    // (B, KVH, T, D)
  if (cache) std::tie(k, v) = cache->append(layer_index_, k, v);  // (B, KVH, S, D)
  auto out = scaled_attention(q, k, v, mask);                      // (B, H, T, D)
  return o_proj(out.transpose(1, 2).reshape({B, T, num_heads_ * head_dim_}));  // (B, T, C)
}

torch::Tensor scaled_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const AttentionMask& mask) {
  [[maybe_unused]] const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  [[maybe_unused]] const int64_t KVH = k.size(1), Tk = k.size(2), G = H / KVH;
#if TORCH_VERSION_MAJOR >= 2  // every 1.13 / 2.x difference is listed in docs/gpu.md
  // Fused kernel (flash / memory-efficient on CUDA, flash on CPU). k/v repeated per query head.
  auto kk = G == 1 ? k : k.unsqueeze(2).expand({B, KVH, G, Tk, D}).reshape({B, H, Tk, D});
  auto vv = G == 1 ? v : v.unsqueeze(2).expand({B, KVH, G, Tk, D}).reshape({B, H, Tk, D});
  if (mask.causal_only)
    return at::scaled_dot_product_attention(q, kk, vv, c10::nullopt, 0.0, /*is_causal=*/true);
  return at::scaled_dot_product_attention(q, kk, vv, mask.additive, 0.0, /*is_causal=*/false);
#else
  // Query heads h*G .. h*G+G-1 share kv head h, so fold the group into the query axis: k and v
  // are never repeated. The mask is added inside the score GEMM (baddbmm, beta 1), so there is
  // no separate masking pass and nothing for autograd to save.
  if (!mask.grouped.defined()) {
    const int64_t MB = mask.additive.size(0);  // B or 1
    auto g = mask.additive.unsqueeze(2).expand({MB, KVH, G, Tq, Tk});  // (MB, KVH, G, Tq, Tk)
    mask.grouped = MB == 1 ? g.narrow(1, 0, 1).reshape({1, G * Tq, Tk}) : g.reshape({MB * KVH, G * Tq, Tk});
  }
  const double scale = 1.0 / std::sqrt(double(D));
  auto qg = q.reshape({B * KVH, G * Tq, D});                    // (B*KVH, G*Tq, D)
  auto kt = k.reshape({B * KVH, Tk, D}).transpose(1, 2);        // (B*KVH, D, Tk)
  auto scores = torch::baddbmm(mask.grouped, qg, kt, 1.0, scale);  // (B*KVH, G*Tq, Tk)
  auto acc = accumulate_dtype(q.scalar_type());
  auto probs = torch::softmax(scores, -1, acc).to(v.scalar_type());  // (B*KVH, G*Tq, Tk)
  return torch::bmm(probs, v.reshape({B * KVH, Tk, D})).view({B, H, Tq, D});  // (B, H, Tq, D)
#endif
}

}  // namespace grpo::model
