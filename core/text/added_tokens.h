// Added tokens (tokenizer.json "added_tokens"): special and ordinary tokens matched in the raw
// text before the model runs, leftmost-longest like Hugging Face's Aho-Corasick tries, with
// single_word, lstrip and rstrip. Tokens with normalized=false match the raw input; tokens with
// normalized=true match the normalized text (their patterns normalized the same way).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/text/json_where.h"

namespace grpo::text {

class Normalizer;

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
  // What decode() hands the decoder: the content, normalized when `normalized` is set (as HF
  // does: with a Prepend("▁") normalizer "<sep>" decodes as "▁<sep>").
  std::string decoded;
};

// A cut of a string: [start, end), and the added token it is (-1: plain text for the model).
struct Segment {
  size_t start, end;
  int32_t id;
};

// A byte trie answering "longest pattern starting here".
class TokenTrie {
public:
  void add(std::string_view pattern, size_t token_index);
  // Longest pattern at s[pos]: its length and token index, or {0, npos}.
  std::pair<size_t, size_t> longest_at(std::string_view s, size_t pos) const;
  bool empty() const { return nodes_.size() <= 1; }

private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    size_t token = std::string::npos;
  };
  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

class AddedVocabulary {
public:
  AddedVocabulary() = default;
  // `list` is "added_tokens"; `model_id` resolves a content to the model's id (or -1).
  template <typename ModelId>
  void load(const json& list, const JsonWhere& where, ModelId&& model_id);
  // Builds the two tries (call after load; `normalizer` may be null).
  void build_tries(const Normalizer* normalizer);  // also sets AddedToken::decoded

  // Cuts `s` at added tokens of the raw (normalized=false) or normalized set.
  void split(std::string_view s, bool normalized_set, std::vector<Segment>& out) const;

  const AddedToken* by_id(int32_t id) const;
  const AddedToken* by_content(std::string_view content) const;
  bool is_special(int32_t id) const {
    const AddedToken* t = by_id(id);
    return t && t->special;
  }
  const std::vector<AddedToken>& tokens() const { return tokens_; }

private:
  void add(AddedToken token);
  std::vector<AddedToken> tokens_;  // mutable only until build_tries
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  TokenTrie raw_trie_, normalized_trie_;
};

template <typename ModelId>
void AddedVocabulary::load(const json& list, const JsonWhere& where, ModelId&& model_id) {
  if (list.is_null()) return;
  if (!list.is_array()) throw_bad(where, "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    JsonWhere w = where.at(i);
    AddedToken tok;
    tok.content = get_string(t, "content", w, "");
    if (tok.content.empty()) throw_bad(w.at("content"), "missing or empty");
    tok.special = get_bool(t, "special", w, false);
    tok.lstrip = get_bool(t, "lstrip", w, false);
    tok.rstrip = get_bool(t, "rstrip", w, false);
    tok.single_word = get_bool(t, "single_word", w, false);
    tok.normalized = get_bool(t, "normalized", w, !tok.special);
    int32_t mid = model_id(tok.content);
    if (mid >= 0) {
      tok.id = mid;
    } else if (t.contains("id") && t["id"].is_number_integer()) {
      tok.id = t["id"].get<int32_t>();
    } else {
      throw_bad(w.at("id"), "missing id for added token \"" + tok.content + "\"");
    }
    add(std::move(tok));
  }
}

}  // namespace grpo::text
