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
  std::vector<std::vector<int64_t>> row_units;  // packing by units: the unit indices of each row
  // batch/* metrics of docs/formulas.md, "Token budget packing", for this step.
  std::map<std::string, double> metrics;
};

// lengths[i]: forwarded tokens (prompt + completion) of sample i.
PackedBatches pack_token_budget(const std::vector<int64_t>& lengths, int64_t token_budget);

// Samples with the same prompt forwarded once (docs/formulas.md, "Shared prompts"): a unit is one
// copy of a prompt followed by the completions of the samples whose prompt it is.
struct PromptUnit {
  std::vector<int64_t> members;  // sample indices, ascending
  int64_t prompt_tokens = 0;
  int64_t tokens = 0;  // prompt_tokens + the members' completion tokens
};
struct PromptUnitOptions {
  bool share = true;  // false: every sample is a unit of its own
  int64_t cap = 0;    // > 0: no unit of several samples is longer than this (token_budget)
  // > 0: the attention cost of one (query, key) pair in token-equivalents. A unit is attended
  // densely (L^2 pairs, most of them masked), so a completion starts a new copy of the prompt when
  // that costs less than the pairs it would add: 2 w T C >= P + w (P^2 + 2 P C).
  double attention_weight = 0;
};
// Units of samples with prompts `prompts[i]` and completions of `completion_lengths[i]` tokens, in
// the order of their first sample; a group that `o` splits keeps its members in order, each part
// with its own copy of the prompt. A single sample longer than the cap stays a unit of its own.
std::vector<PromptUnit> prompt_units(const std::vector<const std::vector<int64_t>*>& prompts,
                                     const std::vector<int64_t>& completion_lengths, const PromptUnitOptions& o);
// pack_token_budget over units: rows of whole units (first-fit decreasing by unit tokens), given as
// sample indices, and in row_units as unit indices; a unit longer than the budget (one long sample)
// is dropped.
PackedBatches pack_token_budget(const std::vector<PromptUnit>& units, int64_t token_budget);
// Fixed-count micro-batches of `batch_size` samples in order (the last may be smaller).
PackedBatches pack_fixed_count(const std::vector<int64_t>& lengths, int64_t batch_size);

}  // namespace grpo::grpo
