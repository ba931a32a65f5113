// Two open-addressing hash tables sized once at load, for the tokenizer's hot lookups:
// TokenIndex (token string -> id, keys stored once in the id -> token array) and PairMap
// ((left id, right id) -> (merge rank, merged id)). Both are read-only after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace grpo::text {

inline uint64_t hash_bytes(std::string_view s) {  // FNV-1a, then a final mix
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h ^ (h >> 29);
}

inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Maps token strings to ids; the strings live in `tokens` (indexed by id), the table holds ids.
class TokenIndex {
public:
  // tokens[id] is the token for id ("" with present[id] false for holes).
  void build(const std::vector<std::string>* tokens, const std::vector<bool>& present) {
    tokens_ = tokens;
    size_t n = 0;
    for (bool p : present) n += p;
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    mask_ = cap - 1;
    slots_.assign(cap, Slot{0, -1});
    for (size_t id = 0; id < tokens->size(); ++id) {
      if (!present[id]) continue;
      uint64_t h = hash_bytes((*tokens)[id]);
      size_t i = h & mask_;
      while (slots_[i].id >= 0) i = (i + 1) & mask_;
      slots_[i] = Slot{static_cast<uint32_t>(h >> 32), static_cast<int32_t>(id)};
    }
  }
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    uint64_t h = hash_bytes(key);
    auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && (*tokens_)[static_cast<size_t>(s.id)] == key) return s.id;
    }
  }

private:
  struct Slot {
    uint32_t tag;
    int32_t id;
  };
  const std::vector<std::string>* tokens_ = nullptr;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// (left, right) -> (rank, merged id). A later insert of the same pair overwrites (as a Rust
// HashMap built from the merges list does).
class PairMap {
public:
  struct Value {
    int32_t rank, id;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    mask_ = cap - 1;
    slots_.assign(cap, Slot{kEmpty, {0, 0}});
  }
  void insert(int32_t a, int32_t b, Value v) {
    uint64_t key = make_key(a, b);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty || slots_[i].key == key) {
        slots_[i] = Slot{key, v};
        return;
      }
    }
  }
  const Value* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    uint64_t key = make_key(a, b);
    for (size_t i = mix64(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }

private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t make_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  struct Slot {
    uint64_t key;
    Value value;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace grpo::text
