// PrefixRouter against the reference proxy (src/lora_proxy.py in AmineDiro/hfjobs-lora-buckets):
// the expected picks and counters below were produced by running the reference's PrefixRouter
// class (Python) on the same scenarios. Hash values differ (Blake2b-256 truncated vs blake2b-128)
// but only hash equality enters a routing decision, so every pick must match.
#include <QtTest>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/cluster/prefix_router.h"

using grpo::cluster::PrefixRouter;
using grpo::cluster::RouteCandidate;

namespace {

std::vector<int64_t> tmpl() {
  std::vector<int64_t> t;
  for (int i = 0; i < 32; ++i) t.push_back((7 * i + 3) % 1000);
  return t;
}

// A chat-template prefix (2 blocks) and 37 prompt-specific tokens (2 whole blocks + 5).
std::vector<int64_t> prompt(int p) {
  auto t = tmpl();
  for (int j = 0; j < 37; ++j) t.push_back((1000 + 97 * p + 11 * j) % 5000);
  return t;
}

std::vector<RouteCandidate> cands(const std::vector<int64_t>& inflight) {
  std::vector<RouteCandidate> c;
  for (size_t i = 0; i < inflight.size(); ++i) c.push_back({static_cast<int>(i), inflight[i]});
  return c;
}

}  // namespace

class TestPrefixRouter : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void blocksAreWholeChainedAndSeeded() {
    PrefixRouter r;
    QCOMPARE(r.block_hashes("m", std::vector<int64_t>(15, 1)).size(), size_t(0));
    QCOMPARE(r.block_hashes("m", prompt(0)).size(), size_t(4));  // 69 tokens -> 4 whole blocks
    auto a = r.block_hashes("m", prompt(0)), b = r.block_hashes("m", prompt(1));
    QVERIFY(a[0] == b[0] && a[1] == b[1]);  // shared template
    QVERIFY(a[2] != b[2] && a[3] != b[3]);
    auto c = r.block_hashes("other", prompt(0));
    QVERIFY(c[0] != a[0]);  // seeded with the adapter name
    // Chained: the same 16 tokens after a different prefix hash differently.
    std::vector<int64_t> x(32, 5), y(32, 5);
    y[0] = 6;
    QVERIFY(r.block_hashes("m", x)[1] != r.block_hashes("m", y)[1]);
  }

  // 12 prompts x G = 8 over 3 workers, each group finishing before the next: every group stays on
  // one worker and at least 80 % of completions are affinity hits (issue 5, tests).
  void groupsStayTogetherAsInTheReference() {
    PrefixRouter r;
    std::string picks;
    for (int p = 0; p < 12; ++p) {
      std::vector<int64_t> inflight(3, 0);
      for (int g = 0; g < 8; ++g) {
        const int id = r.choose(cands(inflight), "policy-v1", prompt(p));
        ++inflight[id];
        picks += std::to_string(id);
      }
    }
    QCOMPARE(QString::fromStdString(picks),
             QString("000000000000000011111111222222220000000011111111222222220000000011111111222222220000000011111111"));
    QCOMPARE(r.stats().routed, int64_t(96));
    QCOMPARE(r.stats().affinity, int64_t(85));
    QCOMPARE(r.stats().spilled, int64_t(0));
    QCOMPARE(r.stats().unmatched, int64_t(11));
    QVERIFY(r.stats().affinity * 100 >= 80 * r.stats().routed);
  }

  // Requests of 6 prompts interleaved, nothing finishing: the reference's picks exactly.
  void interleavedPromptsMatchTheReference() {
    PrefixRouter r;
    std::vector<int64_t> inflight(3, 0);
    std::string picks;
    for (int g = 0; g < 8; ++g)
      for (int p = 0; p < 6; ++p) {
        const int id = r.choose(cands(inflight), "policy-v2", prompt(p));
        ++inflight[id];
        picks += std::to_string(id);
      }
    QCOMPARE(QString::fromStdString(picks), QString("002121002121002121002121002121002121002121002121"));
    QCOMPARE(r.stats().affinity, int64_t(43));
    QCOMPARE(r.stats().unmatched, int64_t(5));
  }

  // One prompt, nothing finishing: once its worker is more than 8 requests ahead, requests spill.
  void imbalanceCapSpills() {
    PrefixRouter r;
    std::vector<int64_t> inflight(3, 0);
    std::string picks;
    for (int k = 0; k < 24; ++k) {
      const int id = r.choose(cands(inflight), "m", prompt(0));
      ++inflight[id];
      picks += std::to_string(id);
    }
    QCOMPARE(QString::fromStdString(picks), QString("000000000222222222111111"));
    QCOMPARE(r.stats().affinity, int64_t(16));
    QCOMPARE(r.stats().spilled, int64_t(2));
    QCOMPARE(r.stats().unmatched, int64_t(6));
  }

  // A worker that left owns nothing: its prompts route as unmatched, least loaded, round robin.
  void forgottenWorkerLosesAffinity() {
    PrefixRouter r;
    QCOMPARE(r.choose(cands({0, 0}), "m", prompt(3)), 0);
    QCOMPARE(r.choose(cands({1, 0}), "m", prompt(3)), 0);  // affinity despite load 1 vs 0
    QCOMPARE(r.stats().affinity, int64_t(1));
    r.forget_worker(0);
    r.choose(cands({0, 0}), "m", prompt(3));
    QCOMPARE(r.stats().unmatched, int64_t(2));
    // Only one candidate left (worker 0 gone): it gets everything.
    QCOMPARE(r.choose({{1, 5}}, "m", prompt(4)), 1);
  }

  // Our rules (prefix_router.h; the reference has neither). Group affinity: 6 groups of 8 with
  // prompts shorter than a block (no prefix to match), sent interleaved and nothing finishing:
  // every group stays on the worker its first request went to, and the groups spread.
  void groupAffinityKeepsAGroupTogether() {
    PrefixRouter r;
    std::vector<int64_t> inflight(3, 0);
    std::map<int, std::set<int>> where;
    for (int g = 0; g < 8; ++g)
      for (int group = 0; group < 6; ++group) {
        const int id = r.choose(cands(inflight), "m", {int64_t(100 + group)}, "group-" + std::to_string(group));
        ++inflight[id];
        where[group].insert(id);
      }
    for (const auto& [group, ids] : where) QVERIFY2(ids.size() == 1, qPrintable(QString("group %1 split").arg(group)));
    QCOMPARE(inflight, std::vector<int64_t>({16, 16, 16}));
    QCOMPARE(r.stats().grouped, int64_t(6 * 7));
    QCOMPARE(r.stats().unmatched, int64_t(6));
    // Past the imbalance (8) the group spills, and its later requests follow the new worker.
    PrefixRouter s;
    QCOMPARE(s.choose(cands({0, 0}), "m", {1}, "g"), 0);
    QCOMPARE(s.choose(cands({8, 0}), "m", {1}, "g"), 0);   // 8 beyond the least: still together
    QCOMPARE(s.choose(cands({9, 0}), "m", {1}, "g"), 1);   // 9: spilled to the least delay
    QCOMPARE(s.choose(cands({0, 9}), "m", {1}, "g"), 0);   // and from then on, spilled to 0 again
    QCOMPARE(s.choose(cands({3, 3}), "m", {1}, "g"), 0);   // ... where the key now points
    // A worker that left takes its groups with it.
    s.forget_worker(0);
    QCOMPARE(s.choose(cands({5, 0}), "m", {1}, "g"), 1);
    QCOMPARE(s.stats().grouped, int64_t(2));
  }

  // Shortest expected delay, (inflight + 1) x seconds per request: a worker 10.5x slower than two
  // others gets its first request only once each of them has 10 in flight (11 x 0.1 > 1.05).
  void slowWorkerGetsItsShareByExpectedDelay() {
    PrefixRouter r;
    std::vector<int64_t> inflight(3, 0);
    const std::vector<double> service = {0.1, 0.1, 1.05};
    auto measured = [&] {
      std::vector<RouteCandidate> c;
      for (int i = 0; i < 3; ++i) c.push_back({i, inflight[i], service[i]});
      return c;
    };
    for (int k = 0; k < 21; ++k) ++inflight[r.choose(measured(), "m", {int64_t(k)})];
    QCOMPARE(inflight, std::vector<int64_t>({10, 10, 1}));
    // A worker not measured yet counts as the fastest measured one: it is tried.
    QCOMPARE(r.choose({{0, 3, 0.1}, {1, 3, 0.1}, {2, 0, 0.0}}, "m", {99}), 2);
    // Unmeasured everywhere: the reference's least inflight, round robin among ties.
    QCOMPARE(r.choose({{0, 2, 0.0}, {1, 1, 0.0}}, "m", {98}), 1);
  }
};

QTEST_GUILESS_MAIN(TestPrefixRouter)
#include "test_prefix_router.moc"
