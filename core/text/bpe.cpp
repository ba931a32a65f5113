// BPE model: see bpe.h. Mirrors tokenizers/src/models/bpe/{model,word}.rs.
#include "core/text/bpe.h"

#include <cstdio>
#include <queue>

#include "core/common/error.h"
#include "core/text/unicode.h"

namespace grpo::text {
namespace {
constexpr size_t kCacheCapacity = 1 << 18;  // words; cleared when full
constexpr size_t kCacheMaxWordBytes = 256;
}  // namespace

BpeModel::BpeModel(const json& j, const JsonWhere& where) {
  const json& vocab = require(j, "vocab", where);
  if (!vocab.is_object()) throw_bad(where.at("vocab"), "expected an object {token: id}");
  size_t max_id = 0;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0) {
      throw_bad(where.at("vocab").at(it.key()), "expected a non-negative integer id");
    }
    max_id = std::max(max_id, it.value().get<size_t>());
  }
  tokens_.assign(vocab.empty() ? 0 : max_id + 1, std::string());
  present_.assign(tokens_.size(), false);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    auto id = it.value().get<size_t>();
    tokens_[id] = it.key();
    present_[id] = true;
  }
  index_.build(&tokens_, present_);

  if (j.contains("unk_token") && j["unk_token"].is_string()) unk_token_ = j["unk_token"].get<std::string>();
  prefix_ = get_string(j, "continuing_subword_prefix", where, "");
  suffix_ = get_string(j, "end_of_word_suffix", where, "");
  fuse_unk_ = get_bool(j, "fuse_unk", where, false);
  byte_fallback_ = get_bool(j, "byte_fallback", where, false);
  ignore_merges_ = get_bool(j, "ignore_merges", where, false);
  if (byte_fallback_) {
    byte_ids_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      byte_ids_[b] = index_.find(name);
    }
  }

  // Merges: "a b" strings or ["a", "b"] pairs; rank = position in the list.
  const json merges = j.value("merges", json::array());
  if (!merges.is_array()) throw_bad(where.at("merges"), "expected an array");
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string_view a, b;
    std::string line;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        throw_bad(where.at("merges").at(rank), "expected \"left right\", got \"" + s + "\"");
      }
      a = std::string_view(s).substr(0, space);
      b = std::string_view(s).substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get_ref<const std::string&>();
      b = m[1].get_ref<const std::string&>();
    } else {
      throw_bad(where.at("merges").at(rank), "expected \"left right\" or [left, right]");
    }
    int32_t ia = index_.find(a), ib = index_.find(b);
    std::string merged(a);
    merged += (!prefix_.empty() && b.substr(0, prefix_.size()) == prefix_) ? b.substr(prefix_.size()) : b;
    int32_t im = index_.find(merged);
    if (ia < 0 || ib < 0 || im < 0) {
      throw_bad(where.at("merges").at(rank),
                "merge of \"" + std::string(a) + "\" and \"" + std::string(b) +
                    "\" uses a token missing from the vocab");
    }
    merges_.insert(ia, ib, {static_cast<int32_t>(rank), im});
  }
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[id]) return nullptr;
  return &tokens_[id];
}

int32_t BpeModel::unk_id(std::string_view word) const {
  int32_t id = index_.find(*unk_token_);
  if (id < 0) {
    throw Error("BPE model", "unk_token \"" + *unk_token_ + "\" is not in the vocab (needed for \"" +
                                 std::string(word) + "\")");
  }
  return id;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    int32_t id = index_.find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  auto add = [&](int32_t id) {
    int32_t n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };

  // 1. One symbol per character (with prefix/suffix), byte fallback or unk for unknown ones.
  int32_t pending_unk = -1;  // an unk id waiting to be added (fuse_unk grows it)
  std::string scratch;
  for (size_t i = 0; i < word.size();) {
    size_t len = utf8_len(static_cast<unsigned char>(word[i]));
    std::string_view piece = word.substr(i, len);
    bool is_first = i == 0, is_last = i + len >= word.size();
    i += len;
    if ((!is_first && !prefix_.empty()) || (is_last && !suffix_.empty())) {
      scratch.clear();
      if (!is_first) scratch += prefix_;
      scratch += piece;
      if (is_last) scratch += suffix_;
      piece = scratch;
    }
    int32_t id = index_.find(piece);
    if (id >= 0) {
      if (pending_unk >= 0) add(pending_unk), pending_unk = -1;
      add(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : piece) all = all && byte_ids_[b] >= 0;
      if (all) {
        // Note: like HF, a pending unk is not flushed before byte-fallback tokens.
        for (unsigned char b : piece) add(byte_ids_[b]);
        continue;
      }
    }
    if (unk_token_) {
      if (pending_unk >= 0 && fuse_unk_) continue;  // fused into the pending unk
      if (pending_unk >= 0) add(pending_unk);
      pending_unk = unk_id(word);
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  // 2. Merge: lowest rank first, then leftmost position; stale queue entries are skipped.
  struct Merge {
    int32_t pos, rank, new_id;
    bool operator<(const Merge& o) const {  // priority_queue pops the "largest"
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Merge> heap_storage;
  heap_storage.clear();
  std::priority_queue<Merge> queue(std::less<Merge>(), std::move(heap_storage));
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const auto* m = merges_.find(symbols[k].id, symbols[k + 1].id)) {
      queue.push({static_cast<int32_t>(k), m->rank, m->id});
    }
  }
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol& cur = symbols[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = symbols[cur.next];
    const auto* m = merges_.find(cur.id, right.id);
    if (!m || m->id != top.new_id) continue;  // expired entry
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) symbols[cur.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const auto* pm = merges_.find(symbols[cur.prev].id, cur.id)) {
        queue.push({cur.prev, pm->rank, pm->id});
      }
    }
    if (cur.next >= 0) {
      if (const auto* nm = merges_.find(cur.id, symbols[cur.next].id)) {
        queue.push({top.pos, nm->rank, nm->id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.alive) out.push_back(s.id);
  }
}

}  // namespace grpo::text
