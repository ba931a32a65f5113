// Decoder layer wiring with Hugging Face submodule names.
#include "core/model/decoder_layer.h"

#include <torch/torch.h>

namespace grpo::model {

DecoderLayerImpl::DecoderLayerImpl(const io::ModelConfig& c, int64_t layer_index, torch::Dtype dtype,
                                   torch::Device device) {
  auto norm = RMSNormOptions(c.hidden_size).eps(c.rms_norm_eps).offset_one(c.gemma_norm).dtype(dtype).device(device);
  input_layernorm = register_module("input_layernorm", RMSNorm(norm));
  self_attn = register_module(
      "self_attn", Attention(AttentionOptions(c, layer_index).dtype(dtype).device(device)));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(norm));
  if (c.sandwich_norm) {
    pre_feedforward_layernorm = register_module("pre_feedforward_layernorm", RMSNorm(norm));
    post_feedforward_layernorm = register_module("post_feedforward_layernorm", RMSNorm(norm));
  }
  mlp = register_module("mlp", MLP(c, dtype, device));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const RopeTables& rope,
                                        const AttentionMask& mask, KVCache* cache) {
  if (!pre_feedforward_layernorm.is_empty()) {
    auto h = x + post_attention_layernorm(self_attn(input_layernorm(x), rope, mask, cache));  // (B, T, C)
    return h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)));              // (B, T, C)
  }
  auto h = x + self_attn(input_layernorm(x), rope, mask, cache);  // (B, T, C)
  return h + mlp(post_attention_layernorm(h));                    // (B, T, C)
}

}  // namespace grpo::model
