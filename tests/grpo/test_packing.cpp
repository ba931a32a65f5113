// Token-budget packing: every sample in exactly one row, no row over budget, oversize samples
// dropped and counted, metrics consistent; fixed-count batches.
#include <QtTest>

#include <random>

#include "core/grpo/packing.h"

using namespace grpo::grpo;

class TestPacking : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void handExample() {
    // Budget 10: 9 | 6+4 | 5+3+2 ; 12 dropped.
    auto p = pack_token_budget({5, 9, 12, 3, 6, 4, 2}, 10);
    QCOMPARE(p.rows.size(), size_t(3));
    QCOMPARE(p.rows[0], std::vector<int64_t>({1}));
    QCOMPARE(p.rows[1], std::vector<int64_t>({4, 5}));
    QCOMPARE(p.rows[2], std::vector<int64_t>({0, 3, 6}));
    QCOMPARE(p.dropped_oversize, std::vector<int64_t>({2}));
    QCOMPARE(p.metrics["batch/dropped_oversize_total"], 1.0);
    QCOMPARE(p.metrics["batch/samples_per_row"], 2.0);
    QCOMPARE(p.metrics["batch/row_fill_frac"], 29.0 / 30.0);
    QCOMPARE(p.metrics["batch/row_tokens_max"], 10.0);
    // Σ L² per row: 81, 52, 38 -> max / mean.
    QVERIFY(std::fabs(p.metrics["batch/row_imbalance"] - 81.0 / (171.0 / 3.0)) < 1e-12);
  }
  void randomInvariants() {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t budget = 16 + rng() % 200;
      std::vector<int64_t> len(1 + rng() % 60);
      for (auto& l : len) l = 1 + rng() % (budget + 20);
      auto p = pack_token_budget(len, budget);
      std::vector<int> seen(len.size(), 0);
      for (const auto& row : p.rows) {
        int64_t t = 0;
        for (int64_t i : row) { t += len[i]; seen[i]++; }
        QVERIFY(t <= budget && !row.empty());
      }
      for (int64_t i : p.dropped_oversize) { QVERIFY(len[i] > budget); seen[i]++; }
      for (size_t i = 0; i < len.size(); ++i) QCOMPARE(seen[i], 1);
    }
  }
  void fixedCount() {
    auto p = pack_fixed_count({1, 2, 3, 4, 5}, 2);
    QCOMPARE(p.rows.size(), size_t(3));
    QCOMPARE(p.rows[2], std::vector<int64_t>({4}));
    QCOMPARE(p.metrics["batch/samples_per_step"], 5.0);
  }
};

QTEST_GUILESS_MAIN(TestPacking)
#include "test_packing.moc"
