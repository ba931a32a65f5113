// Rotary position embedding, computed exactly as transformers does (in fp32): inverse frequencies
// for the "default" and "llama3" rope types, cos/sin tables for given position ids, and the
// rotate-half application to q and k.
#pragma once

#include <torch/types.h>

#include "core/io/hf_config.h"

namespace grpo::model {

// (head_dim / 2) fp32 inverse frequencies. Throws grpo::Error for an unsupported rope_type.
torch::Tensor rope_inv_freq(const io::ModelConfig& config);

struct RopeTables {
  torch::Tensor cos;  // (B, T, 1, D) in the compute dtype
  torch::Tensor sin;  // (B, T, 1, D)
};

// Tables for position_ids (B, T) int64; computed in fp32, then cast to `dtype`.
RopeTables rope_tables(const torch::Tensor& inv_freq, const torch::Tensor& position_ids,
                       torch::Dtype dtype);

// x (B, T, H, D) -> x * cos + rotate_half(x) * sin, same shape.
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& t);

}  // namespace grpo::model
