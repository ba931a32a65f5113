// Rotary position embedding, computed exactly as transformers does (in fp32): inverse frequencies
// for every rope type of modeling_rope_utils (default, linear, dynamic, yarn, longrope, llama3),
// cos/sin tables for given position ids (times the type's attention scaling), and the rotate-half
// application to q and k, over the first rotary_dim() dims of each head (Phi-3's partial rotary).
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "core/io/hf_config.h"

namespace grpo::model {

// Which rope a layer uses: gemma3_text's sliding layers use the default rope with
// rope_local_base_freq; every other layer the config's rope_theta and rope_scaling.
enum class RopeKind { Global, Local };

// (rotary_dim / 2) fp32 inverse frequencies for a call whose largest position id is
// max_position (dynamic and longrope depend on it, as transformers' dynamic_rope_update does on
// torch.max(position_ids) + 1; -1 = at init, no call yet). Throws grpo::Error for an unsupported
// rope type.
torch::Tensor rope_inv_freq(const io::ModelConfig& config, RopeKind kind = RopeKind::Global,
                            int64_t max_position = -1);
// The factor cos and sin are multiplied by (yarn's and longrope's attention factor; 1 otherwise).
double rope_attention_scaling(const io::ModelConfig& config, RopeKind kind = RopeKind::Global);
// Whether rope_inv_freq depends on max_position (dynamic, longrope).
bool rope_depends_on_length(const io::ModelConfig& config, RopeKind kind = RopeKind::Global);

struct RopeTables {
  torch::Tensor cos;  // (B, T, 1, R) in the compute dtype, R = rotary dims
  torch::Tensor sin;  // (B, T, 1, R)
};

// Tables for position_ids (B, T) int64; computed in fp32, scaled, then cast to `dtype`.
RopeTables rope_tables(const torch::Tensor& inv_freq, const torch::Tensor& position_ids,
                       torch::Dtype dtype, double attention_scaling = 1.0);

// x (B, T, H, D) -> x * cos + rotate_half(x) * sin on the first R dims, the rest unchanged.
torch::Tensor apply_rope(const torch::Tensor& x, const RopeTables& t);

}  // namespace grpo::model
