// KVCache: keys and values of every layer for incremental decoding of a batch of sequences.
//
// Layout choice: rows are LEFT-PADDED. Every row has the same number of slots (length()); a
// boolean valid() mask (B, length) says which slots hold real tokens. Each forward call appends
// its T tokens to every row at the same slot offset, so writes are one slice copy per layer, and
// the last position of every row is a real token. Position ids count real tokens only, so a
// row's positions are the same as if it had been run alone without padding. A row whose sequence
// ended can keep being fed padding (attention_mask 0).
//
// Prefill-and-expand for GRPO: prefill B prompts once, then expand_rows(G) duplicates each
// prompt's cached keys/values into G consecutive rows (prompt b -> rows b*G .. b*G+G-1), and
// decoding continues on B*G rows. select_rows() drops or reorders rows (e.g. finished ones).
//
// Storage is preallocated per layer as (B, KVH, capacity, D) and grows by doubling. Use the cache
// under torch::NoGradGuard or torch::InferenceMode (and keep using the same one).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace grpo::model {

class KVCache {
public:
  // reserve: slots to allocate up front (e.g. prompt + max completion length); grows if exceeded.
  explicit KVCache(int64_t num_layers, int64_t reserve = 0);

  int64_t num_layers() const { return int64_t(keys_.size()); }
  int64_t batch_size() const { return valid_.defined() ? valid_.size(0) : 0; }
  int64_t length() const { return length_; }  // slots used in every row
  bool empty() const { return length_ == 0; }
  // (B, length) bool: true where the slot holds a real token.
  const torch::Tensor& valid() const { return valid_; }
  // (B) int64: real tokens per row, i.e. the position id of each row's next token.
  torch::Tensor token_counts() const;

  // Keeps rows `index` (B') int64 of the current rows, in that order; duplicates allowed.
  void select_rows(const torch::Tensor& index);
  // Repeats every row G times consecutively (row b -> rows b*G .. b*G+G-1).
  void expand_rows(int64_t G);
  void clear();

  // --- used by CausalLM::forward ---
  // Writes k, v (B, KVH, T, D) of layer `layer` into slots [length, length+T) and returns the
  // keys/values of slots [0, length+T): (B, KVH, length+T, D) each.
  std::pair<torch::Tensor, torch::Tensor> append(int64_t layer, const torch::Tensor& k,
                                                 const torch::Tensor& v);
  // After every layer appended: marks the T new slots with new_valid (B, T) bool, length += T.
  void advance(const torch::Tensor& new_valid);

private:
  int64_t reserve_;
  int64_t length_ = 0;
  torch::Tensor valid_;                     // (B, length) bool
  std::vector<torch::Tensor> keys_, values_;  // per layer (B, KVH, capacity, D)
};

}  // namespace grpo::model
