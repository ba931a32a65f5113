// Segmented attention of one packed row (ForwardArgs::segments; docs/formulas.md, "Segmented
// attention"). A row of T tokens is cut into segments; a segment's queries are its own tokens and
// its keys are an optional prefix (another span of the row: a prompt its completions share)
// followed by its own tokens, attended causally. Position-wise work (projections, MLP, norms, the
// LM head) runs over the T tokens with no padding at all; only attention is laid out per segment:
// by the segment kernel where it runs (segment_attention.h: a CPU, fp32 or fp64), else in buckets
// of similar lengths padded to the bucket's longest, so a row costs
//   sum over buckets of n * (Lq * Lk)  (query, key) pairs
// instead of the T^2 of a masked packed row.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

namespace grpo::model {

struct AttentionMask;

// The fixed cost of one more attention bucket (its kernels and their backward, in every layer), in
// (query, key) pairs. On `grpo bench grpo-step`'s defaults 1,024 to 65,536 all ran within the
// machine's noise of each other (about 1 to 20 buckets a row); 4,096 sits in the middle.
inline constexpr double kDefaultBucketPairs = 4096;

// Queries [begin, begin + len); keys [prefix_begin, prefix_begin + prefix_len) then [begin, begin + len)
// causally. Positions continue the prefix: prefix_len + t for the segment's t-th token.
struct AttentionSegment {
  int64_t begin = 0, len = 0;
  int64_t prefix_begin = 0, prefix_len = 0;
};

// The segments of a row, laid out for attention: each bucket gathers its segments' queries and keys
// from the row's tokens, (n, Lq) and (n, Lk) slots (padding slots gather token 0 and are masked),
// and `inverse` takes each token's output back from the buckets' concatenated query slots.
struct AttentionSegments {
  // The segments themselves, and whether attention runs them through the segment kernel
  // (segment_attention.h) instead of buckets; with the kernel, buckets and their indices are empty.
  std::vector<AttentionSegment> list;
  bool kernel = false;
  struct Bucket {
    int64_t n = 0, lq = 0, lk = 0;
    torch::Tensor q_index, k_index;         // (n * lq), (n * lk) int64 token indices
    std::shared_ptr<AttentionMask> mask;    // (n, 1, lq, lk)
  };
  std::vector<Bucket> buckets;
  torch::Tensor inverse;  // (T) int64
  // Every bucket's q_index (k_index) back to back, and each one's length: what gather_rows takes,
  // built once per forward instead of once per layer.
  torch::Tensor q_all, k_all;
  std::vector<int64_t> q_counts, k_counts;
  torch::Tensor positions;  // (1, T) int64: prefix_len + t for a segment's token t
};

// Checks that `segments` cover every token of a row of `T` exactly once as queries, with prefixes
// inside the row and before their segment; throws grpo::Error naming the segment otherwise.
void check_segments(const std::vector<AttentionSegment>& segments, int64_t T);

// How a segmented row is attended: the segment kernel wherever it runs (a CPU, fp32 or fp64, no
// soft-capping: segment_kernel_supports), buckets elsewhere; Buckets forces them (tests compare).
enum class SegmentPath { Auto, Buckets };

// The row's position ids and, unless the kernel takes the row, buckets of segments (sorted by key
// length, cut where a new bucket's fixed cost `bucket_pairs`, in (query, key) pairs, is less than the
// padding it saves) with masks in `dtype` on `device`. `head_dim` and `softcap` are the model's
// head size and logit soft-capping (segment_kernel_supports).
// Checks the segments first (check_segments).
std::shared_ptr<const AttentionSegments> plan_segments(const std::vector<AttentionSegment>& segments, int64_t T,
                                                       torch::Dtype dtype, torch::Device device, int64_t head_dim,
                                                       double softcap = 0.0, SegmentPath path = SegmentPath::Auto,
                                                       double bucket_pairs = kDefaultBucketPairs);
// x (T, ...) gathered at consecutive runs of `index`, `counts[i]` indices each: the i-th output is
// x.index_select(0, the i-th run), with one backward for all of them (a single scatter-add instead
// of a full-size gradient per run).
std::vector<torch::Tensor> gather_rows(const torch::Tensor& x, const torch::Tensor& index,
                                       const std::vector<int64_t>& counts);
// The (query, key) pairs of a segmented row as ModelFlops counts a sequence (its full L x L square):
// len * (prefix_len + len) per segment, bucket padding left out.
double segment_pairs(const std::vector<AttentionSegment>& segments);

}  // namespace grpo::model
