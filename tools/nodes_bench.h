// `grpo bench nodes`: each fused autograd node of the model against the composite of LibTorch
// operators it replaces, forward and backward at one shape (by default the demo's step: 2,150
// tokens of tiny-arith), the two interleaved in one process so both see the same machine. Checked:
// each node's output and input gradient must match the composite's (relative 1e-4, fp32).
//
// Nodes (docs/formulas.md, "Fused nodes"): lora_qkv (q, k and v in one node), lora_gate_up,
// lora_down (a group of one), rmsnorm, swiglu. Each reports fused_ms and composite_ms (medians)
// and speedup = composite / fused; "speedup" overall is the sum of the composites' medians over the
// sum of the nodes' (what a layer saves, weighted by where its time goes).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace grpo::model {

struct NodesBenchOptions {
  int64_t rows = 2150;         // tokens of the step (the demo's)
  int64_t hidden = 128;        // tiny-arith's sizes
  int64_t intermediate = 384;
  int64_t q_dim = 128;         // heads * head_dim
  int64_t kv_dim = 64;         // kv heads * head_dim
  int64_t lora_r = 16;
  int threads = 1;             // LibTorch's and OpenBLAS's (0 = leave both as they are)
  int iters = 100;             // timed runs of each, interleaved (median reported)
};

nlohmann::json bench_nodes(const NodesBenchOptions& options);

}  // namespace grpo::model
