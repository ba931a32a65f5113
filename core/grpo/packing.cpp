#include "core/grpo/packing.h"

#include <algorithm>
#include <numeric>

#include "core/common/error.h"

namespace grpo::grpo {
namespace {

void fill_metrics(PackedBatches& p, const std::vector<int64_t>& lengths, int64_t capacity) {
  double tokens_total = 0, max_tokens = 0, sq_max = 0, sq_total = 0, samples = 0;
  for (const auto& row : p.rows) {
    double t = 0, sq = 0;
    for (int64_t i : row) {
      t += static_cast<double>(lengths[i]);
      sq += static_cast<double>(lengths[i]) * static_cast<double>(lengths[i]);
    }
    tokens_total += t;
    max_tokens = std::max(max_tokens, t);
    sq_total += sq;
    sq_max = std::max(sq_max, sq);
    samples += static_cast<double>(row.size());
  }
  const double n_rows = static_cast<double>(p.rows.size());
  auto& m = p.metrics;
  m["batch/microbatches_per_step"] = n_rows;
  m["batch/samples_per_step"] = samples;
  m["batch/forwarded_tokens_per_step"] = tokens_total;
  m["batch/samples_per_row"] = n_rows > 0 ? samples / n_rows : 0.0;
  m["batch/row_tokens_mean"] = n_rows > 0 ? tokens_total / n_rows : 0.0;
  m["batch/row_tokens_max"] = max_tokens;
  m["batch/row_imbalance"] = sq_total > 0 ? sq_max / (sq_total / n_rows) : 1.0;
  if (capacity > 0 && n_rows > 0) m["batch/row_fill_frac"] = tokens_total / (n_rows * static_cast<double>(capacity));
  m["batch/dropped_oversize_total"] = static_cast<double>(p.dropped_oversize.size());
}

}  // namespace

PackedBatches pack_token_budget(const std::vector<int64_t>& lengths, int64_t token_budget) {
  check(token_budget > 0, "token_budget", "must be > 0 for packed rows");
  PackedBatches p;
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  // Longest first; ties by index so the packing is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  std::vector<int64_t> used;
  for (int64_t i : order) {
    if (lengths[i] > token_budget) {
      p.dropped_oversize.push_back(i);
      continue;
    }
    size_t r = 0;
    while (r < used.size() && used[r] + lengths[i] > token_budget) ++r;
    if (r == used.size()) {
      p.rows.emplace_back();
      used.push_back(0);
    }
    p.rows[r].push_back(i);
    used[r] += lengths[i];
  }
  for (auto& row : p.rows) std::sort(row.begin(), row.end());
  std::sort(p.dropped_oversize.begin(), p.dropped_oversize.end());
  fill_metrics(p, lengths, token_budget);
  return p;
}

PackedBatches pack_fixed_count(const std::vector<int64_t>& lengths, int64_t batch_size) {
  check(batch_size > 0, "per_device_train_batch_size", "must be > 0");
  PackedBatches p;
  for (size_t i = 0; i < lengths.size(); i += static_cast<size_t>(batch_size)) {
    std::vector<int64_t> row;
    for (size_t j = i; j < std::min(lengths.size(), i + static_cast<size_t>(batch_size)); ++j)
      row.push_back(static_cast<int64_t>(j));
    p.rows.push_back(std::move(row));
  }
  fill_metrics(p, lengths, 0);
  return p;
}

}  // namespace grpo::grpo
