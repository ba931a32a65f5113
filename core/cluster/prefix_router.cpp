// PrefixRouter: the reference proxy's block table and choice rule, in the same order of steps.
#include "core/cluster/prefix_router.h"

#include <QCryptographicHash>

#include <algorithm>
#include <cstring>

#include "core/common/error.h"

namespace grpo::cluster {
namespace {

// The reference uses blake2b(digest_size=16). Qt offers Blake2b with 160+ bit digests only, so
// this takes the first 16 bytes of Blake2b-256: different values, the same chaining and seeding.
PrefixRouter::BlockHash digest16(const QByteArray& data) {
  const QByteArray d = QCryptographicHash::hash(data, QCryptographicHash::Blake2b_256);
  PrefixRouter::BlockHash h{};
  std::memcpy(h.data(), d.constData(), h.size());
  return h;
}

}  // namespace

size_t PrefixRouter::BlockHashFn::operator()(const BlockHash& h) const {
  size_t v;
  std::memcpy(&v, h.data(), sizeof(v));
  return v;
}

PrefixRouter::PrefixRouter(int block_size, int64_t imbalance, size_t max_blocks, bool group_rules)
    : block_size_(block_size), imbalance_(imbalance), max_blocks_(max_blocks), group_rules_(group_rules) {
  check(block_size_ > 0 && max_blocks_ > 0, "prefix router", "block_size and max_blocks must be positive");
}

std::vector<PrefixRouter::BlockHash> PrefixRouter::block_hashes(const std::string& model,
                                                                const std::vector<int64_t>& prompt) const {
  std::vector<BlockHash> out;
  BlockHash prev = digest16(QByteArray::fromStdString(model));
  const size_t size = static_cast<size_t>(block_size_);
  for (size_t i = 0; i + size <= prompt.size(); i += size) {
    // The chunk as Python's json.dumps writes a list of ints: "[1, 2, 3]".
    std::string chunk = "[";
    for (size_t j = i; j < i + size; ++j) chunk += (j > i ? ", " : "") + std::to_string(prompt[j]);
    chunk += "]";
    QByteArray data(reinterpret_cast<const char*>(prev.data()), static_cast<qsizetype>(prev.size()));
    data.append(chunk.data(), static_cast<qsizetype>(chunk.size()));
    prev = digest16(data);
    out.push_back(prev);
  }
  return out;
}

int PrefixRouter::choose(const std::vector<RouteCandidate>& candidates, const std::string& model,
                         const std::vector<int64_t>& prompt, const std::string& affinity) {
  check(!candidates.empty(), "prefix router", "no worker to route to", "wait for a worker to join");
  const auto hashes = block_hashes(model, prompt);
  const size_t n = candidates.size();
  std::set<int> live;
  for (const auto& c : candidates) live.insert(c.id);

  // Leading blocks each candidate has served (matched_prefix).
  std::vector<int64_t> matched(n, 0);
  std::set<int> alive = live;
  for (const auto& h : hashes) {
    auto it = blocks_.find(h);
    if (it == blocks_.end()) break;
    std::set<int> next;
    std::set_intersection(alive.begin(), alive.end(), it->second.owners.begin(), it->second.owners.end(),
                          std::inserter(next, next.begin()));
    alive.swap(next);
    if (alive.empty()) break;
    for (size_t i = 0; i < n; ++i) matched[i] += alive.count(candidates[i].id) ? 1 : 0;
  }
  // Blocks up to the last common one (common_prefix_len).
  int64_t common = 0;
  for (size_t i = 0; i < hashes.size(); ++i) {
    auto it = blocks_.find(hashes[i]);
    if (it == blocks_.end()) break;
    const auto& owners = it->second.owners;
    const bool all_own = std::includes(owners.begin(), owners.end(), live.begin(), live.end());
    if (all_own || it->second.successors.size() >= 2) common = static_cast<int64_t>(i) + 1;
  }
  int64_t least = candidates[0].inflight;
  for (const auto& c : candidates) least = std::min(least, c.inflight);
  // max by (specific, -inflight); the first index wins ties, as Python's max() does.
  size_t best = 0;
  auto specific = [&](size_t i) { return std::max<int64_t>(0, matched[i] - common); };
  for (size_t i = 1; i < n; ++i) {
    if (specific(i) > specific(best) ||
        (specific(i) == specific(best) && candidates[i].inflight < candidates[best].inflight))
      best = i;
  }
  // Group affinity (ours): where the group's first request went, while within the imbalance.
  size_t grouped = n;
  const bool grouping = group_rules_ && !affinity.empty();
  if (auto g = grouping ? groups_.find(affinity) : groups_.end(); g != groups_.end())
    for (size_t i = 0; i < n; ++i)
      if (candidates[i].id == g->second && candidates[i].inflight - least <= imbalance_) grouped = i;
  ++stats_.routed;
  size_t pick;
  if (grouped < n) {
    pick = grouped;
    ++stats_.grouped;
  } else if (specific(best) > 0 && candidates[best].inflight - least <= imbalance_) {
    pick = best;
    ++stats_.affinity;
  } else {
    if (specific(best) > 0) ++stats_.spilled;
    else ++stats_.unmatched;
    // Shortest expected delay (ours; the reference's least inflight when nothing is measured).
    double fastest = 0;
    for (const auto& c : candidates)
      if (group_rules_ && c.service_s > 0 && (fastest == 0 || c.service_s < fastest)) fastest = c.service_s;
    auto delay = [&](size_t i) {
      const double s = group_rules_ && candidates[i].service_s > 0 ? candidates[i].service_s : fastest > 0 ? fastest : 1.0;
      return static_cast<double>(candidates[i].inflight + 1) * s;
    };
    double shortest = delay(0);
    for (size_t i = 1; i < n; ++i) shortest = std::min(shortest, delay(i));
    std::vector<size_t> ties;
    for (size_t i = 0; i < n; ++i)
      if (delay(i) == shortest) ties.push_back(i);
    pick = ties[rr_ % ties.size()];
    ++rr_;
  }
  const int pick_id = candidates[pick].id;
  if (grouping && grouped == n) {
    auto [g, fresh] = groups_.insert_or_assign(affinity, pick_id);
    if (fresh) group_order_.push_back(affinity);
    while (groups_.size() > kMaxGroups) {
      groups_.erase(group_order_.front());
      group_order_.pop_front();
    }
  }
  for (size_t i = 0; i < hashes.size(); ++i) {
    auto it = blocks_.find(hashes[i]);
    if (it == blocks_.end()) {
      lru_.push_back(hashes[i]);
      it = blocks_.emplace(hashes[i], Entry{{}, {}, std::prev(lru_.end())}).first;
    } else {
      lru_.splice(lru_.end(), lru_, it->second.lru);  // move_to_end
    }
    it->second.owners.insert(pick_id);
    auto& succ = it->second.successors;
    if (i + 1 < hashes.size() && succ.size() < 2 && std::find(succ.begin(), succ.end(), hashes[i + 1]) == succ.end())
      succ.push_back(hashes[i + 1]);
  }
  while (blocks_.size() > max_blocks_) {
    blocks_.erase(lru_.front());
    lru_.pop_front();
  }
  return pick_id;
}

void PrefixRouter::forget_worker(int id) {
  for (auto& [h, e] : blocks_) e.owners.erase(id);
  group_order_.remove_if([&](const std::string& key) {
    auto g = groups_.find(key);
    if (g == groups_.end() || g->second != id) return false;
    groups_.erase(g);
    return true;
  });
}

}  // namespace grpo::cluster
