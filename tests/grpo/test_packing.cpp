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
  // Prompt units (docs/formulas.md, "Shared prompts"): samples with one prompt share it, in order
  // of their first sample; the cap and the attention cost split a group, members kept in order.
  void promptUnits() {
    const std::vector<int64_t> a = {1, 2, 3}, b = {4, 5}, a2 = {1, 2, 3};
    const std::vector<const std::vector<int64_t>*> prompts = {&b, &a, &b, &a2, &a, &b};
    const std::vector<int64_t> completions = {4, 2, 3, 5, 1, 6};
    auto members = [](const std::vector<PromptUnit>& us) {
      std::vector<std::vector<int64_t>> out;
      for (const auto& u : us) out.push_back(u.members);
      return out;
    };
    using Rows = std::vector<std::vector<int64_t>>;
    auto shared = prompt_units(prompts, completions, {});
    QCOMPARE(members(shared), Rows({{0, 2, 5}, {1, 3, 4}}));  // equal prompts, not equal pointers
    QCOMPARE(shared[0].tokens, 2 + 4 + 3 + 6);
    QCOMPARE(shared[1].prompt_tokens, int64_t(3));
    QCOMPARE(members(prompt_units(prompts, completions, {false, 0, 0})), Rows({{0}, {1}, {2}, {3}, {4}, {5}}));
    // Cap 9: 2+4+3 | 2+6 and 3+2 (+5 = 10 > 9) | 3+5+1.
    auto capped = prompt_units(prompts, completions, {true, 9, 0});
    QCOMPARE(members(capped), Rows({{0, 2}, {5}, {1}, {3, 4}}));
    for (const auto& u : capped) QVERIFY(u.tokens <= 9);
    // Attention cost: with w = 1 a completion of C after T tokens starts a new copy of a P-token
    // prompt when 2 T C >= P + P^2 + 2 P C. Prompt b (P = 2): T = 6, C = 3: 36 >= 18, split;
    // T = 5, C = 6: 60 >= 30, split. Prompt a (P = 3): T = 5, C = 5: 50 >= 42, split; T = 8, C = 1:
    // 16 < 18, shared.
    auto dear = prompt_units(prompts, completions, {true, 0, 1.0});
    QCOMPARE(members(dear), Rows({{0}, {2}, {5}, {1}, {3, 4}}));
    // w = 0.01: 0.36 < 2.16, and every later one too: nothing split.
    QCOMPARE(members(prompt_units(prompts, completions, {true, 0, 0.01})), members(shared));
    // Packing by units: rows of whole units, sample indices sorted, row_units naming the units.
    auto p = pack_token_budget(capped, 9);
    QCOMPARE(p.rows.size(), size_t(4));  // units of 9, 9, 8 and 5 tokens: no two fit in 9
    int64_t samples = 0;
    for (size_t r = 0; r < p.rows.size(); ++r) {
      std::vector<int64_t> from_units;
      for (int64_t u : p.row_units[r]) from_units.insert(from_units.end(), capped[u].members.begin(), capped[u].members.end());
      std::sort(from_units.begin(), from_units.end());
      QCOMPARE(p.rows[r], from_units);
      samples += int64_t(p.rows[r].size());
    }
    QCOMPARE(samples, int64_t(6));
    QCOMPARE(p.metrics["batch/samples_per_step"], 6.0);
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
