// Added tokens: see added_tokens.h. Follows tokenizers/src/tokenizer/added_vocabulary.rs
// (find_matches, refresh_added_tokens).
#include "core/text/added_tokens.h"

#include <algorithm>

#include "core/text/normalizers.h"
#include "core/text/unicode.h"

namespace grpo::text {

void TokenTrie::add(std::string_view pattern, size_t token_index) {
  if (pattern.empty()) return;
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  int32_t node = 0;
  for (unsigned char c : pattern) {
    auto& ch = nodes_[node].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, int32_t{-1}));
    if (it != ch.end() && it->first == c) {
      node = it->second;
    } else {
      auto next = static_cast<int32_t>(nodes_.size());
      ch.insert(it, {c, next});
      nodes_.emplace_back();
      node = next;
    }
  }
  // The first token registered for a pattern wins (duplicates keep the earlier one).
  if (nodes_[node].token == std::string::npos) nodes_[node].token = token_index;
}

std::pair<size_t, size_t> TokenTrie::longest_at(std::string_view s, size_t pos) const {
  std::pair<size_t, size_t> best{0, std::string::npos};
  if (!first_byte_[static_cast<unsigned char>(s[pos])]) return best;
  int32_t node = 0;
  for (size_t i = pos; i < s.size(); ++i) {
    const auto& ch = nodes_[node].children;
    auto c = static_cast<unsigned char>(s[i]);
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, int32_t{-1}));
    if (it == ch.end() || it->first != c) break;
    node = it->second;
    if (nodes_[node].token != std::string::npos) best = {i + 1 - pos, nodes_[node].token};
  }
  return best;
}

void AddedVocabulary::add(AddedToken token) {
  auto found = by_content_.find(token.content);
  if (found != by_content_.end()) {
    tokens_[found->second] = std::move(token);  // a later entry updates the earlier one
    by_id_[tokens_[found->second].id] = found->second;
    return;
  }
  by_id_[token.id] = tokens_.size();
  by_content_[token.content] = tokens_.size();
  tokens_.push_back(std::move(token));
}

void AddedVocabulary::build_tries(const Normalizer* normalizer) {
  // HF builds each trie from special tokens first, then ordinary ones.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      AddedToken& t = tokens_[i];
      if (t.special != (pass == 0)) continue;
      t.decoded = t.content;
      if (!t.normalized) {
        raw_trie_.add(t.content, i);
      } else {
        if (normalizer) normalizer->normalize(t.decoded);
        normalized_trie_.add(t.decoded, i);
      }
    }
  }
}

const AddedToken* AddedVocabulary::by_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::by_content(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

namespace {

bool is_word_char(char32_t c) { return c == '_' || is_alphanumeric(c); }

// The code point ending just before `end`.
char32_t last_char(std::string_view s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t len;
  return decode_utf8(s, start, len);
}

}  // namespace

void AddedVocabulary::split(std::string_view s, bool normalized_set,
                            std::vector<Segment>& out) const {
  const TokenTrie& trie = normalized_set ? normalized_trie_ : raw_trie_;
  if (trie.empty()) {
    out.push_back({0, s.size(), -1});
    return;
  }
  size_t start_offset = 0;
  for (size_t pos = 0; pos < s.size();) {
    auto [len, index] = trie.longest_at(s, pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[index];
    size_t start = pos, stop = pos + len;
    if (tok.single_word) {
      size_t clen;
      bool start_ok = start == 0 || !is_word_char(last_char(s, start));
      bool stop_ok = stop == s.size() || !is_word_char(decode_utf8(s, stop, clen));
      if (!start_ok || !stop_ok) {
        pos = stop;  // Aho-Corasick continues after the discarded match
        continue;
      }
    }
    if (tok.lstrip) {
      size_t new_start = start;
      while (new_start > 0 && is_whitespace(last_char(s, new_start))) {
        size_t k = new_start - 1;
        while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        new_start = k;
      }
      start = std::max(new_start, start_offset);
    }
    if (tok.rstrip) {
      size_t clen;
      while (stop < s.size() && is_whitespace(decode_utf8(s, stop, clen))) stop += clen;
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
    pos = stop;
  }
  if (start_offset < s.size()) out.push_back({start_offset, s.size(), -1});
}

}  // namespace grpo::text
