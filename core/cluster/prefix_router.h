// PrefixRouter: KV-prefix affinity for completion requests, the rules of the reference proxy
// (src/lora_proxy.py in AmineDiro/hfjobs-lora-buckets; docs/workers.md, "Prefix-affinity routing"):
// - a prompt's token ids are cut into whole 16-token blocks, hashed in a chain seeded with the
//   model/adapter name (blake2b);
// - every block remembers the workers that have served it and up to 2 distinct successor blocks;
// - a block is "common" when every live worker owns it or it has >= 2 successors (a chat
//   template, a shared preamble); blocks up to the last common one identify no prompt;
// - the worker with the most specific (non-common) matched blocks wins, unless it has more than
//   `imbalance` requests in flight beyond the least loaded; otherwise the least loaded worker is
//   taken, round-robin among ties;
// - counters: affinity (routed by prefix), spilled (had a prefix, too busy), unmatched.
// Pure logic, no I/O; not thread-safe (the Router serialises calls).
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace grpo::cluster {

struct RouteCandidate {
  int id = 0;            // the worker's stable id
  int64_t inflight = 0;  // requests it has in flight now
};

struct PrefixRouterStats {
  int64_t routed = 0, affinity = 0, spilled = 0, unmatched = 0;
};

class PrefixRouter {
public:
  using BlockHash = std::array<uint8_t, 16>;

  explicit PrefixRouter(int block_size = 16, int64_t imbalance = 8, size_t max_blocks = 500000);

  // Chained block hashes (whole blocks only).
  std::vector<BlockHash> block_hashes(const std::string& model, const std::vector<int64_t>& prompt) const;
  // Picks one of `candidates` (non-empty) for the prompt and records that it now owns the
  // prompt's blocks. Returns the chosen id.
  int choose(const std::vector<RouteCandidate>& candidates, const std::string& model,
             const std::vector<int64_t>& prompt);
  // Forgets everything a worker owned (it left; a restarted worker has an empty cache).
  void forget_worker(int id);

  const PrefixRouterStats& stats() const { return stats_; }
  size_t tracked_blocks() const { return blocks_.size(); }

private:
  struct BlockHashFn {
    size_t operator()(const BlockHash& h) const;
  };
  struct Entry {
    std::set<int> owners;
    std::vector<BlockHash> successors;  // at most 2
    std::list<BlockHash>::iterator lru;
  };

  int block_size_;
  int64_t imbalance_;
  size_t max_blocks_;
  std::unordered_map<BlockHash, Entry, BlockHashFn> blocks_;
  std::list<BlockHash> lru_;  // oldest first
  uint64_t rr_ = 0;
  PrefixRouterStats stats_;
};

}  // namespace grpo::cluster
