// Grouped-query self-attention of a decoder layer: q/k/v/o LoraLinear projections (q/k/v bias for
// qwen2 or attention_bias; one fused qkv_proj for phi3), per-head q_norm/k_norm RMSNorm for qwen3
// and gemma3_text, RoPE, an optional KV cache, and masked softmax attention computed without
// repeating k/v per head, with Gemma 2's query_pre_attn_scalar scale and logit soft-capping.
#pragma once

#include <cstdint>
#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "core/io/hf_config.h"
#include "core/model/lora_linear.h"
#include "core/model/norm.h"
#include "core/model/rope.h"
#include "core/model/segments.h"

namespace grpo::model {

class KVCache;

// Which keys each query may see, shared by every layer of one forward call.
struct AttentionMask {
  // Pure causal attention over the call's own tokens (no padding, packing or cache); lets the
  // fused kernel use its built-in causal mask.
  bool causal_only = true;
  // (B or 1, 1, Tq, Tk) bool, true where the key is hidden from the query. Always set.
  torch::Tensor blocked;
  // (B or 1, 1, Tq, Tk) additive mask in the compute dtype: 0 where visible, the dtype's lowest
  // finite value where blocked. Always set.
  torch::Tensor additive;
  // The additive mask laid out for grouped-query scores, (B*KVH or 1, G*Tq, Tk); built by the
  // first layer that needs it and shared by the others.
  mutable torch::Tensor grouped;
  // Segmented attention of a (1, T) row (segments.h): when set, each bucket's own mask applies and
  // blocked/additive above are not built.
  std::shared_ptr<const AttentionSegments> segments;
};

// An AttentionMask from `blocked` (B or 1, Tq, Tk) bool, true where the key is hidden, with the
// additive form in `dtype` (a finite fill, as transformers uses).
AttentionMask attention_mask(const torch::Tensor& blocked, bool causal_only, torch::Dtype dtype);

struct AttentionOptions {
  AttentionOptions(io::ModelConfig config, int64_t layer_index)
      : config_(std::move(config)), layer_index_(layer_index) {}
  TORCH_ARG(io::ModelConfig, config);
  TORCH_ARG(int64_t, layer_index);
  TORCH_ARG(torch::Dtype, dtype) = torch::kFloat32;
  TORCH_ARG(torch::Device, device) = torch::Device(torch::kCPU);
};

class AttentionImpl : public torch::nn::Module {
public:
  explicit AttentionImpl(const AttentionOptions& options);

  // x (B, T, C) -> (B, T, C). With a cache, k/v of these T tokens are appended to it and the
  // queries attend to everything cached so far (as allowed by `mask`).
  torch::Tensor forward(const torch::Tensor& x, const RopeTables& rope, const AttentionMask& mask,
                        KVCache* cache = nullptr);

  LoraLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  LoraLinear qkv_proj{nullptr};              // phi3 instead of q_proj, k_proj, v_proj
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // qwen3, gemma3_text only

private:
  int64_t layer_index_, num_heads_, num_kv_heads_, head_dim_;
  double scale_;    // query_pre_attn_scalar^-0.5, else head_dim^-0.5
  double softcap_;  // attn_logit_softcapping, 0 = none
};
TORCH_MODULE(Attention);

// softmax(cap(q k^T * scale) + mask) v for q (B, H, Tq, D), k/v (B, KVH, Tk, D) -> (B, H, Tq, D),
// where scale 0 means 1/sqrt(D) and cap(s) = softcap * tanh(s / softcap) when softcap > 0.
// Softmax runs in fp32 for half dtypes. Uses LibTorch 2.x's fused scaled_dot_product_attention
// where available (not with soft-capping, which it cannot do).
torch::Tensor scaled_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const AttentionMask& mask, double scale = 0.0,
                               double softcap = 0.0);

}  // namespace grpo::model
