// Attention: projections -> (q/k norm) -> RoPE -> KV cache -> masked attention -> o_proj.
#include "core/model/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>
#include <torch/version.h>

#include "core/model/kv_cache.h"
#include "core/model/segment_attention.h"
#include "core/model/segments.h"

namespace grpo::model {

AttentionImpl::AttentionImpl(const AttentionOptions& o)
    : layer_index_(o.layer_index()),
      num_heads_(o.config().num_attention_heads),
      num_kv_heads_(o.config().num_key_value_heads),
      head_dim_(o.config().head_dim),
      scale_(1.0 / std::sqrt(o.config().query_pre_attn_scalar ? *o.config().query_pre_attn_scalar
                                                              : double(o.config().head_dim))),
      softcap_(o.config().attn_logit_softcapping.value_or(0.0)) {
  const auto& c = o.config();
  const bool qkv_bias = c.model_type == "qwen2" || c.attention_bias;
  const bool o_bias = c.model_type != "qwen2" && c.attention_bias;  // llama: attention_bias covers o
  auto lin = [&](int64_t in, int64_t out, bool bias) {
    return LoraLinear(LoraLinearOptions(in, out).bias(bias).dtype(o.dtype()).device(o.device()));
  };
  if (c.fused_qkv) {
    qkv_proj = register_module("qkv_proj", lin(c.hidden_size, c.q_dim() + 2 * c.kv_dim(), qkv_bias));
  } else {
    q_proj = register_module("q_proj", lin(c.hidden_size, c.q_dim(), qkv_bias));
    k_proj = register_module("k_proj", lin(c.hidden_size, c.kv_dim(), qkv_bias));
    v_proj = register_module("v_proj", lin(c.hidden_size, c.kv_dim(), qkv_bias));
  }
  o_proj = register_module("o_proj", lin(c.q_dim(), c.hidden_size, o_bias));
  if (c.qk_norm || c.model_type == "qwen3") {
    auto n = RMSNormOptions(head_dim_).eps(c.rms_norm_eps).offset_one(c.gemma_norm).dtype(o.dtype()).device(o.device());
    q_norm = register_module("q_norm", RMSNorm(n));
    k_norm = register_module("k_norm", RMSNorm(n));
  }
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const RopeTables& rope,
                                     const AttentionMask& mask, KVCache* cache) {
  const int64_t B = x.size(0), T = x.size(1);
  torch::Tensor q, k, v;
  if (!qkv_proj.is_empty()) {  // Phi-3: rows of q, then k, then v
    auto qkv = qkv_proj(x);  // (B, T, (H + 2 KVH) D)
    const int64_t qd = num_heads_ * head_dim_, kvd = num_kv_heads_ * head_dim_;
    q = qkv.narrow(-1, 0, qd).reshape({B, T, num_heads_, head_dim_});
    k = qkv.narrow(-1, qd, kvd).reshape({B, T, num_kv_heads_, head_dim_});
    v = qkv.narrow(-1, qd + kvd, kvd).reshape({B, T, num_kv_heads_, head_dim_});
  } else {
    auto qkv = lora_linear_group(x, {q_proj.get(), k_proj.get(), v_proj.get()});
    q = qkv[0].view({B, T, num_heads_, head_dim_});     // (B, T, H, D)
    k = qkv[1].view({B, T, num_kv_heads_, head_dim_});  // (B, T, KVH, D)
    v = qkv[2].view({B, T, num_kv_heads_, head_dim_});  // (B, T, KVH, D)
  }
  if (!q_norm.is_empty()) {
    q = q_norm(q);
    k = k_norm(k);
  }
  if (mask.segments) {
    // Segmented row (B = 1): attention per bucket of segments, gathered from and put back into
    // token order; everything else stays flat.
    const auto& plan = *mask.segments;
    const int64_t H = num_heads_, KVH = num_kv_heads_, D = head_dim_;
    auto qf = apply_rope(q, rope).reshape({T, H, D});
    auto kf = apply_rope(k, rope).reshape({T, KVH, D});
    auto vf = v.reshape({T, KVH, D});
    if (plan.kernel) return o_proj(segment_attention(qf, kf, vf, plan.list, scale_).view({B, T, H * D}));
    auto qs = gather_rows(qf, plan.q_all, plan.q_counts);
    auto ks = gather_rows(kf, plan.k_all, plan.k_counts), vs = gather_rows(vf, plan.k_all, plan.k_counts);
    std::vector<torch::Tensor> outs;
    for (size_t i = 0; i < plan.buckets.size(); ++i) {
      const auto& b = plan.buckets[i];
      auto qb = qs[i].view({b.n, b.lq, H, D}).transpose(1, 2);    // (n, H, Lq, D)
      auto kb = ks[i].view({b.n, b.lk, KVH, D}).transpose(1, 2);  // (n, KVH, Lk, D)
      auto vb = vs[i].view({b.n, b.lk, KVH, D}).transpose(1, 2);  // (n, KVH, Lk, D)
      auto ob = scaled_attention(qb, kb, vb, *b.mask, scale_, softcap_);  // (n, H, Lq, D)
      outs.push_back(ob.transpose(1, 2).reshape({b.n * b.lq, H * D}));
    }
    auto out = (outs.size() == 1 ? outs[0] : torch::cat(outs)).index_select(0, plan.inverse);  // (T, H*D)
    return o_proj(out.view({B, T, H * D}));
  }
  q = apply_rope(q, rope).transpose(1, 2);  // (B, H, T, D)
  k = apply_rope(k, rope).transpose(1, 2);  // (B, KVH, T, D)
  v = v.transpose(1, 2);                    // (B, KVH, T, D)
  if (cache) std::tie(k, v) = cache->append(layer_index_, k, v);  // (B, KVH, S, D)
  auto out = scaled_attention(q, k, v, mask, scale_, softcap_);    // (B, H, T, D)
  return o_proj(out.transpose(1, 2).reshape({B, T, num_heads_ * head_dim_}));  // (B, T, C)
}

AttentionMask attention_mask(const torch::Tensor& blocked, bool causal_only, torch::Dtype dtype) {
  AttentionMask m;
  m.causal_only = causal_only;
  m.blocked = blocked.unsqueeze(1);  // (B or 1, 1, T, S)
  // A finite fill (as transformers uses): a query whose keys are all hidden (a padding slot)
  // stays finite instead of producing NaN that would leak through the cache into real rows.
  const double lowest = dtype == torch::kFloat64   ? std::numeric_limits<double>::lowest()
                        : dtype == torch::kFloat16 ? -65504.0
                        : dtype == torch::kBFloat16 ? -3.3895313892515355e38
                                                    : double(std::numeric_limits<float>::lowest());
  m.additive = torch::zeros(m.blocked.sizes(), torch::TensorOptions().dtype(dtype).device(blocked.device()))
                   .masked_fill_(m.blocked, lowest);  // (B or 1, 1, T, S)
  return m;
}

namespace {

// The grouped-query attention both LibTorch versions can run: query heads h*G .. h*G+G-1 share kv
// head h, so the group is folded into the query axis and k and v are never repeated. Without
// soft-capping the mask is added inside the score GEMM (baddbmm, beta 1), so there is no separate
// masking pass and nothing for autograd to save.
torch::Tensor grouped_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const AttentionMask& mask, double scale, double softcap) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  const int64_t KVH = k.size(1), Tk = k.size(2), G = H / KVH;
  if (!mask.grouped.defined()) {
    const int64_t MB = mask.additive.size(0);  // B or 1
    auto g = mask.additive.unsqueeze(2).expand({MB, KVH, G, Tq, Tk});  // (MB, KVH, G, Tq, Tk)
    mask.grouped = MB == 1 ? g.narrow(1, 0, 1).reshape({1, G * Tq, Tk}) : g.reshape({MB * KVH, G * Tq, Tk});
  }
  auto qg = q.reshape({B * KVH, G * Tq, D});              // (B*KVH, G*Tq, D)
  auto kt = k.reshape({B * KVH, Tk, D}).transpose(1, 2);  // (B*KVH, D, Tk)
  torch::Tensor scores;                                    // (B*KVH, G*Tq, Tk)
  if (softcap > 0) {
    // Gemma 2: scores * scale, then softcap * tanh(scores / softcap), then the mask.
    scores = torch::tanh(torch::bmm(qg, kt) * scale / softcap) * softcap + mask.grouped;
  } else {
    scores = torch::baddbmm(mask.grouped, qg, kt, 1.0, scale);
  }
  auto acc = accumulate_dtype(q.scalar_type());
  auto probs = torch::softmax(scores, -1, acc).to(v.scalar_type());  // (B*KVH, G*Tq, Tk)
  return torch::bmm(probs, v.reshape({B * KVH, Tk, D})).view({B, H, Tq, D});  // (B, H, Tq, D)
}

}  // namespace

torch::Tensor scaled_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const AttentionMask& mask, double scale,
                               double softcap) {
  const int64_t D = q.size(3);
  if (scale <= 0) scale = 1.0 / std::sqrt(double(D));
#if TORCH_VERSION_MAJOR >= 2  // every 1.13 / 2.x difference is listed in docs/gpu.md
  if (softcap <= 0) {
    // Fused kernel (flash / memory-efficient on CUDA, flash on CPU). k/v repeated per query head;
    // a scale other than 1/sqrt(D) is folded into q (the kernel's scale argument is 2.1+).
    const int64_t B = q.size(0), H = q.size(1), KVH = k.size(1), Tk = k.size(2), G = H / KVH;
    auto kk = G == 1 ? k : k.unsqueeze(2).expand({B, KVH, G, Tk, D}).reshape({B, H, Tk, D});
    auto vv = G == 1 ? v : v.unsqueeze(2).expand({B, KVH, G, Tk, D}).reshape({B, H, Tk, D});
    const double fold = scale * std::sqrt(double(D));
    auto qq = std::abs(fold - 1.0) < 1e-12 ? q : q * fold;
    if (mask.causal_only)
      return at::scaled_dot_product_attention(qq, kk, vv, c10::nullopt, 0.0, /*is_causal=*/true);
    return at::scaled_dot_product_attention(qq, kk, vv, mask.additive, 0.0, /*is_causal=*/false);
  }
#endif
  return grouped_attention(q, k, v, mask, scale, softcap);
}

}  // namespace grpo::model
