// TRL's window reduction (docs/formulas.md, "Metric window reduction"): rates, counters,
// extremes and gauges.
#include <QtTest>

#include <cmath>

#include "core/grpo/metrics.h"

using namespace grpo::grpo;

class TestMetrics : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void classification() {
    QCOMPARE(reduction_for("sample/dropped_stale_total"), Reduction::Sum);
    QCOMPARE(reduction_for("sample/staleness_max"), Reduction::Max);
    QCOMPARE(reduction_for("clip_ratio/low_min"), Reduction::Min);
    QCOMPARE(reduction_for("clip_ratio/high_max"), Reduction::Max);
    QCOMPARE(reduction_for("reward"), Reduction::Mean);
    QCOMPARE(reduction_for("maximum_thing"), Reduction::Mean);  // a word, not a substring
    QCOMPARE(reduction_for("subtotal"), Reduction::Mean);
  }
  void windowReduction() {
    MetricsWindow w;
    for (double v : {1.0, 2.0, 6.0}) {
      w.add("reward", v);
      w.add("sample/dropped_stale_total", v);
      w.add("sample/staleness_max", v);
      w.add("clip_ratio/low_min", v);
    }
    w.add("reward", NAN);  // ignored by gauges
    w.add_rate("batch/row_fill_frac", 30, 40);
    w.add_rate("batch/row_fill_frac", 10, 40);
    auto r = w.reduce();
    QCOMPARE(r["reward"], 3.0);
    QCOMPARE(r["sample/dropped_stale_total"], 9.0);
    QCOMPARE(r["sample/staleness_max"], 6.0);
    QCOMPARE(r["clip_ratio/low_min"], 1.0);
    QCOMPARE(r["batch/row_fill_frac"], 0.5);  // Σnum/Σden, not the mean of ratios
    w.clear();
    QVERIFY(w.empty());
  }
};

QTEST_GUILESS_MAIN(TestMetrics)
#include "test_metrics.moc"
