// The BPE model of tokenizer.json ("model": {"type": "BPE"}), as Hugging Face tokenizers runs
// it: vocab + ranked merges, byte_fallback (<0xNN> tokens), unk_token with fuse_unk,
// ignore_merges, continuing_subword_prefix and end_of_word_suffix. Merging uses a priority
// queue over a linked list of symbols (lowest rank first, then leftmost), and results are
// cached per word.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/text/flat_maps.h"
#include "core/text/json_where.h"

namespace grpo::text {

class BpeModel {
public:
  // `j` is the "model" object; `where` its location (for errors).
  BpeModel(const json& j, const JsonWhere& where);

  // Appends the ids of one pre-tokenized word to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  int32_t token_to_id(std::string_view token) const { return index_.find(token); }
  // nullptr when `id` is not in the vocabulary.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id in the vocabulary.
  size_t vocab_size() const { return tokens_.size(); }

private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t unk_id(std::string_view word) const;

  std::vector<std::string> tokens_;  // id -> token
  std::vector<bool> present_;
  TokenIndex index_;
  PairMap merges_;
  std::optional<std::string> unk_token_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::vector<int32_t> byte_ids_;  // <0xNN> -> id, or -1 (byte_fallback)

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace grpo::text
