// Segmented attention: validation, bucketing and the gather indices (segments.h).
#include "core/model/segments.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/model/attention.h"
#include "core/model/segment_attention.h"

namespace grpo::model {

void check_segments(const std::vector<AttentionSegment>& segments, int64_t T) {
  std::vector<uint8_t> seen(size_t(std::max<int64_t>(T, 0)), 0);
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto& s = segments[i];
    const std::string at = "segment " + std::to_string(i);
    check(s.len > 0 && s.begin >= 0 && s.begin <= T - s.len, "forward",
          at + ": tokens [" + std::to_string(s.begin) + ", +" + std::to_string(s.len) + ") are not inside the row of " +
              std::to_string(T));
    check(s.prefix_len >= 0 && s.prefix_begin >= 0 && s.prefix_begin <= s.begin - s.prefix_len, "forward",
          at + ": its prefix must be a span of the row before its own tokens");
    for (int64_t t = s.begin; t < s.begin + s.len; ++t) {
      check(!seen[size_t(t)], "forward", at + ": token " + std::to_string(t) + " is already another segment's");
      seen[size_t(t)] = 1;
    }
  }
  const auto missing = std::find(seen.begin(), seen.end(), uint8_t(0));
  check(missing == seen.end(), "forward",
        "token " + std::to_string(missing - seen.begin()) + " of the row is in no segment");
}

std::shared_ptr<const AttentionSegments> plan_segments(const std::vector<AttentionSegment>& segments, int64_t T,
                                                       torch::Dtype dtype, torch::Device device, int64_t head_dim,
                                                       double softcap, SegmentPath path, double bucket_pairs) {
  check_segments(segments, T);
  auto plan = std::make_shared<AttentionSegments>();
  plan->list = segments;
  const auto idx = torch::TensorOptions().dtype(torch::kInt64);
  std::vector<int64_t> positions(size_t(T), 0);
  for (const auto& s : segments)
    for (int64_t t = 0; t < s.len; ++t) positions[size_t(s.begin + t)] = s.prefix_len + t;
  plan->positions = torch::tensor(positions, idx).view({1, T}).to(device);
  if (path == SegmentPath::Auto && segment_kernel_supports(dtype, device, head_dim, softcap)) {
    plan->kernel = true;
    return plan;
  }
  const size_t n = segments.size();
  auto lk = [&](size_t i) { return segments[i].prefix_len + segments[i].len; };
  // Longest keys first; a bucket is a run of this order, padded to its longest keys and queries.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return lk(a) != lk(b) ? lk(a) > lk(b) : segments[a].len > segments[b].len;
  });
  // cost[j]: the cheapest bucketing of order[0, j); a bucket holds at most kWindow segments.
  constexpr size_t kWindow = 512;
  std::vector<double> cost(n + 1, std::numeric_limits<double>::infinity());
  std::vector<size_t> cut(n + 1, 0);
  cost[0] = 0;
  for (size_t j = 1; j <= n; ++j) {
    int64_t lq = 0;
    for (size_t i = j; i-- > 0 && j - i <= kWindow;) {
      lq = std::max(lq, segments[order[i]].len);
      const double c = cost[i] + bucket_pairs + double(j - i) * double(lq) * double(lk(order[i]));
      if (c < cost[j]) cost[j] = c, cut[j] = i;
    }
  }
  std::vector<std::pair<size_t, size_t>> runs;  // [i, j) of order
  for (size_t j = n; j > 0; j = cut[j]) runs.emplace_back(cut[j], j);
  std::reverse(runs.begin(), runs.end());

  std::vector<int64_t> inverse(size_t(T), 0);
  int64_t offset = 0;  // query slots of the buckets before
  for (const auto& [i0, i1] : runs) {
    AttentionSegments::Bucket b;
    b.n = int64_t(i1 - i0);
    b.lk = lk(order[i0]);
    for (size_t i = i0; i < i1; ++i) b.lq = std::max(b.lq, segments[order[i]].len);
    std::vector<int64_t> q(size_t(b.n * b.lq), 0), k(size_t(b.n * b.lk), 0);
    std::vector<uint8_t> blocked(size_t(b.n * b.lq * b.lk), 1);
    for (int64_t r = 0; r < b.n; ++r) {
      const auto& s = segments[order[i0 + size_t(r)]];
      for (int64_t t = 0; t < s.prefix_len; ++t) k[size_t(r * b.lk + t)] = s.prefix_begin + t;
      for (int64_t t = 0; t < s.len; ++t) {
        k[size_t(r * b.lk + s.prefix_len + t)] = s.begin + t;
        q[size_t(r * b.lq + t)] = s.begin + t;
        inverse[size_t(s.begin + t)] = offset + r * b.lq + t;
        // Query t sees the whole prefix and its own tokens 0..t.
        uint8_t* row = blocked.data() + size_t((r * b.lq + t) * b.lk);
        std::fill(row, row + s.prefix_len + t + 1, uint8_t(0));
      }
    }
    offset += b.n * b.lq;
    b.q_index = torch::tensor(q, idx).to(device);
    b.k_index = torch::tensor(k, idx).to(device);
    auto blocked_t = torch::from_blob(blocked.data(), {b.n, b.lq, b.lk}, torch::kUInt8).to(torch::kBool).to(device);
    b.mask = std::make_shared<AttentionMask>(attention_mask(blocked_t, false, dtype));
    plan->q_counts.push_back(b.q_index.numel());
    plan->k_counts.push_back(b.k_index.numel());
    plan->buckets.push_back(std::move(b));
  }
  plan->inverse = torch::tensor(inverse, idx).to(device);
  std::vector<torch::Tensor> qs, ks;
  for (const auto& b : plan->buckets) qs.push_back(b.q_index), ks.push_back(b.k_index);
  plan->q_all = torch::cat(qs);
  plan->k_all = torch::cat(ks);
  return plan;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct GatherRowsFunction : torch::autograd::Function<GatherRowsFunction> {
  static variable_list forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor all_index, std::vector<int64_t> counts) {
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["counts"] = counts;
    ctx->save_for_backward({all_index});
    variable_list out;
    int64_t at = 0;
    for (int64_t c : counts) {
      out.push_back(x.index_select(0, all_index.narrow(0, at, c)));
      at += c;
    }
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto index = ctx->get_saved_variables()[0];
    auto sizes = ctx->saved_data["sizes"].toIntVector();
    const auto counts = ctx->saved_data["counts"].toIntVector();
    torch::TensorOptions options;
    for (const auto& g : grads)
      if (g.defined()) options = g.options();
    std::vector<torch::Tensor> parts;
    for (size_t i = 0; i < grads.size(); ++i) {
      if (grads[i].defined()) {
        parts.push_back(grads[i]);
      } else {
        auto shape = sizes;
        shape[0] = counts[i];
        parts.push_back(torch::zeros(shape, options));
      }
    }
    auto g = parts.size() == 1 ? parts[0] : torch::cat(parts);
    return {torch::zeros(sizes, options).index_add_(0, index, g), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::vector<torch::Tensor> gather_rows(const torch::Tensor& x, const torch::Tensor& index,
                                       const std::vector<int64_t>& counts) {
  return GatherRowsFunction::apply(x, index, counts);
}

double segment_pairs(const std::vector<AttentionSegment>& segments) {
  double pairs = 0;
  for (const auto& s : segments) pairs += double(s.len) * double(s.prefix_len + s.len);
  return pairs;
}

}  // namespace grpo::model
