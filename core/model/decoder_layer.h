// One pre-norm decoder layer: x + attn(input_layernorm(x)), then + mlp(post_attention_layernorm).
// Gemma 2/3 ("sandwich" norms): x + post_attention_layernorm(attn(input_layernorm(x))), then
// + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))).
#pragma once

#include <cstdint>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "core/io/hf_config.h"
#include "core/model/attention.h"
#include "core/model/mlp.h"
#include "core/model/norm.h"

namespace grpo::model {

class DecoderLayerImpl : public torch::nn::Module {
public:
  DecoderLayerImpl(const io::ModelConfig& config, int64_t layer_index, torch::Dtype dtype,
                   torch::Device device);
  // (B, T, C) -> (B, T, C)
  torch::Tensor forward(const torch::Tensor& x, const RopeTables& rope, const AttentionMask& mask,
                        KVCache* cache = nullptr);

  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  RMSNorm pre_feedforward_layernorm{nullptr}, post_feedforward_layernorm{nullptr};  // gemma2, gemma3_text
  Attention self_attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace grpo::model
