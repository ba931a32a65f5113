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
// Two rules of our own come around the reference's (docs/workers.md, "Routing"):
// - group affinity: a request with an affinity key goes where the key's first request went, while
//   that worker is a candidate and within `imbalance` (counter: grouped); a GRPO group is ready
//   when its slowest completion is, so one worker's latency is better than the slowest worker's;
// - where the reference takes the least loaded worker, this takes the shortest expected delay,
//   (inflight + 1) x service_s, the worker's measured seconds per request; a worker not measured
//   yet counts as the fastest measured one, and with none measured the rule is the reference's.
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
  double service_s = 0;  // its measured seconds per request (0: not measured yet)
};

struct PrefixRouterStats {
  int64_t routed = 0, affinity = 0, spilled = 0, unmatched = 0, grouped = 0;
};

class PrefixRouter {
public:
  using BlockHash = std::array<uint8_t, 16>;

  // group_rules false: the reference's rules only (affinity keys and service_s are ignored).
  explicit PrefixRouter(int block_size = 16, int64_t imbalance = 8, size_t max_blocks = 500000, bool group_rules = true);

  // Chained block hashes (whole blocks only).
  std::vector<BlockHash> block_hashes(const std::string& model, const std::vector<int64_t>& prompt) const;
  // Picks one of `candidates` (non-empty) for the prompt and records that it now owns the
  // prompt's blocks. Returns the chosen id.
  // `affinity`: the request's group key ("" = none).
  int choose(const std::vector<RouteCandidate>& candidates, const std::string& model,
             const std::vector<int64_t>& prompt, const std::string& affinity = {});
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
  bool group_rules_;
  std::unordered_map<BlockHash, Entry, BlockHashFn> blocks_;
  std::list<BlockHash> lru_;  // oldest first
  // Group affinity: key -> worker, the newest kMaxGroups keys (oldest forgotten first).
  static constexpr size_t kMaxGroups = 4096;
  std::map<std::string, int> groups_;
  std::list<std::string> group_order_;
  uint64_t rr_ = 0;
  PrefixRouterStats stats_;
};

}  // namespace grpo::cluster
