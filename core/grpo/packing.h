// Trainer-side batching (TRL AsyncGRPO's token_budget; docs/formulas.md, "Token budget
// packing"): pack samples into padding-free rows of at most `token_budget` tokens (first-fit
// decreasing, so rows fill well and Σ L² stays balanced), or take fixed-count micro-batches when
// token_budget <= 0.
// Pure index arithmetic; the model core's packed-row forward consumes the rows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace grpo::grpo {

struct PackedBatches {
  std::vector<std::vector<int64_t>> rows;  // sample indices per row (one row = one micro-batch)
  std::vector<int64_t> dropped_oversize;   // samples longer than the budget
  // batch/* metrics of docs/formulas.md, "Token budget packing", for this step.
  std::map<std::string, double> metrics;
};

// lengths[i]: forwarded tokens (prompt + completion) of sample i.
PackedBatches pack_token_budget(const std::vector<int64_t>& lengths, int64_t token_budget);
// Fixed-count micro-batches of `batch_size` samples in order (the last may be smaller).
PackedBatches pack_fixed_count(const std::vector<int64_t>& lengths, int64_t batch_size);

}  // namespace grpo::grpo
