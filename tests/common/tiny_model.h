// A tiny Qwen2-style config (2 layers, 4 heads, 2 KV heads, q/k/v bias, tied embeddings) for tests
// that need a real model but no checkpoint: the sampler, trainer and learning tests.
#pragma once

#include <cstdint>

#include "core/io/hf_config.h"

namespace grpo::testing {

inline io::ModelConfig tiny_qwen2_config(int64_t vocab, int64_t hidden) {
  io::ModelConfig c;
  c.model_type = "qwen2";
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = 2 * hidden;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = hidden / 4;
  c.max_position_embeddings = 512;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-6;
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  c.torch_dtype = "float32";
  return c;
}

}  // namespace grpo::testing
