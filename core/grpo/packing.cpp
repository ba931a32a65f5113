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

std::vector<PromptUnit> prompt_units(const std::vector<const std::vector<int64_t>*>& prompts,
                                     const std::vector<int64_t>& completion_lengths, const PromptUnitOptions& o) {
  check(prompts.size() == completion_lengths.size(), "prompt_units", "one completion length per prompt");
  // Samples by prompt, in order of first appearance.
  auto less = [](const std::vector<int64_t>* a, const std::vector<int64_t>* b) { return *a < *b; };
  std::map<const std::vector<int64_t>*, size_t, decltype(less)> index(less);
  std::vector<std::vector<int64_t>> groups;
  for (size_t i = 0; i < prompts.size(); ++i) {
    check(prompts[i] != nullptr, "prompt_units", "a sample without a prompt");
    if (!o.share) {
      groups.push_back({static_cast<int64_t>(i)});
      continue;
    }
    auto [it, fresh] = index.emplace(prompts[i], groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(static_cast<int64_t>(i));
  }
  const double w = o.attention_weight;
  std::vector<PromptUnit> units;
  for (const auto& g : groups) {
    const int64_t P = static_cast<int64_t>(prompts[g.front()]->size());
    const double p = static_cast<double>(P);
    PromptUnit u;
    for (int64_t i : g) {
      const int64_t C = completion_lengths[i];
      const double c = static_cast<double>(C), t = static_cast<double>(u.tokens);
      const bool over_cap = o.cap > 0 && u.tokens + C > o.cap;
      const bool dearer = w > 0 && 2.0 * w * t * c >= p + w * (p * p + 2.0 * p * c);
      if (!u.members.empty() && (over_cap || dearer)) units.push_back(std::move(u)), u = {};
      if (u.members.empty()) u.prompt_tokens = P, u.tokens = P;
      u.members.push_back(i);
      u.tokens += C;
    }
    units.push_back(std::move(u));
  }
  return units;
}

PackedBatches pack_token_budget(const std::vector<PromptUnit>& units, int64_t token_budget) {
  std::vector<int64_t> lengths;
  for (const auto& u : units) lengths.push_back(u.tokens);
  PackedBatches p = pack_token_budget(lengths, token_budget);  // rows of unit indices
  p.row_units = p.rows;
  auto to_samples = [&](const std::vector<int64_t>& unit_indices) {
    std::vector<int64_t> out;
    for (int64_t u : unit_indices) out.insert(out.end(), units[u].members.begin(), units[u].members.end());
    std::sort(out.begin(), out.end());
    return out;
  };
  for (auto& row : p.rows) row = to_samples(row);
  p.dropped_oversize = to_samples(p.dropped_oversize);
  // Samples, not units, per step and per row.
  double samples = 0;
  for (const auto& row : p.rows) samples += static_cast<double>(row.size());
  p.metrics["batch/samples_per_step"] = samples;
  p.metrics["batch/samples_per_row"] = p.rows.empty() ? 0.0 : samples / static_cast<double>(p.rows.size());
  p.metrics["batch/dropped_oversize_total"] = static_cast<double>(p.dropped_oversize.size());
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
