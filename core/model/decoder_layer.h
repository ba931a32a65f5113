// One pre-norm decoder layer: x + attn(input_layernorm(x)), then + mlp(post_attention_layernorm).
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
  Attention self_attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace grpo::model
