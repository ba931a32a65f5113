// Attention of a segmented row (segments.h) computed segment by segment on the CPU, straight from
// the row's token-major q, k and v: no gathering into padded buckets, no masks, no putting back
// (docs/formulas.md, "Segment attention kernel"). Per query it keeps the log-sum-exp of its scores,
// and backward recomputes the probabilities from it, so memory stays linear in the row's length.
// The buckets (segments.h) cost LibTorch 1.13's batched products one small GEMM per segment, per
// head group, forward and backward; on the demo's shapes (segments of 2 to 20 tokens) that dispatch
// cost more than the arithmetic.
#pragma once

#include <vector>

#include <torch/types.h>

#include "core/model/segments.h"

namespace grpo::model {

// The largest head the kernel takes (a query's accumulators live on the stack).
inline constexpr int64_t kMaxHeadDim = 512;

// Whether segment_attention takes tensors of `dtype` on `device`, heads of `head_dim` and logit
// soft-capping `softcap`: a CPU, fp32 or fp64, heads up to kMaxHeadDim, no soft-capping. Elsewhere
// a segmented row goes through buckets.
bool segment_kernel_supports(torch::Dtype dtype, torch::Device device, int64_t head_dim, double softcap = 0.0);

// Forward keeps every query's probabilities for backward when they take at most this many times
// q's memory (on the demo's shapes about half); otherwise backward recomputes them.
inline constexpr double kKeptProbsRatio = 4.0;

// softmax(scale * q k^T over each query's keys) v for one row: q (T, H, D), k and v (T, KVH, D),
// with H a multiple of KVH (query head h reads kv head h / (H / KVH)) -> (T, H, D). A segment's
// query t sees its prefix, then its own tokens 0..t (segments.h). `segments` must pass
// check_segments for T, which plan_segments does. Differentiable in q, k and v.
torch::Tensor segment_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                const std::vector<AttentionSegment>& segments, double scale,
                                double keep_ratio = kKeptProbsRatio);

}  // namespace grpo::model
