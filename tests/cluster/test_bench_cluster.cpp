// Smoke tests of `grpo bench cluster` and `grpo bench soak` as a user runs them, with tiny
// settings: each starts real `grpo worker` processes on loopback, prints its figures as the last
// line of output (one JSON object), and the accounting of every run adds up (nothing lost, nothing
// twice). Speed is not checked here (that is what the benchmarks and BENCHMARKS.md are for).
// Both runs together stay well inside the 300 s ctest limit of tests/cluster (about 1 minute).
#include "tests/common/test_paths.h"
#include <QProcess>
#include <cmath>
#include <QtTest>

#include <nlohmann/json.hpp>

namespace {

// Runs `grpo bench ARGS` (bounded) and returns its exit code and last line of stdout as JSON.
struct BenchRun {
  int exit_code = -1;
  nlohmann::json result;
  QByteArray output;
};

BenchRun run_bench(const QStringList& args, int timeout_s) {
  BenchRun r;
  QProcess p;
  p.setProcessChannelMode(QProcess::SeparateChannels);
  p.start(GRPO_CLI, QStringList{"bench"} + args);
  if (!p.waitForStarted(10000) || !p.waitForFinished(timeout_s * 1000)) {
    p.kill();
    p.waitForFinished(10000);
    r.output = "did not finish in time: " + p.readAllStandardError();
    return r;
  }
  r.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  const QByteArray out = p.readAllStandardOutput();
  r.output = out + p.readAllStandardError();
  const QList<QByteArray> lines = out.trimmed().split('\n');
  if (!lines.isEmpty()) r.result = nlohmann::json::parse(lines.last().toStdString(), nullptr, false);
  return r;
}

void expect_run_accounted(nlohmann::json run, int64_t steps, const char* what) {
  QVERIFY2(run.is_object(), what);
  QCOMPARE(run["steps"].get<int64_t>(), steps);
  QVERIFY2(run["steps_per_min"].is_number() && run["steps_per_min"].get<double>() > 0, what);
  QVERIFY2(run["accounting_violations"].empty(), run["accounting_violations"].dump().c_str());
  QCOMPARE(run["samples_lost"].get<int64_t>(), int64_t(0));
  // Everything the router answered reached the trainer or a discarded batch.
  auto a = run["accounting"];
  QVERIFY2(a["completed"].get<int64_t>() >= run["trained_completions"].get<int64_t>(), a.dump().c_str());
  QCOMPARE(a["duplicate_groups"].get<int64_t>(), int64_t(0));
}

}  // namespace

class TestBenchCluster : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void clusterFiguresAndAccounting() {
    const auto r = run_bench({"cluster", "--workers", "2", "--steps", "3", "--prompts-per-step", "2",
                              "--num-generations", "4", "--max-completion-length", "4", "--delay-ms", "50",
                              "--ranks", "1", "8", "--repeats", "2", "--scaling-requests", "8",
                              "--scaling-rounds", "1"},
                             150);
    QVERIFY2(r.exit_code == 0, r.output.constData());
    auto j = r.result;
    QVERIFY2(j.is_object() && j.value("bench", "") == "cluster", r.output.constData());
    QVERIFY2(j["accounting_ok"].get<bool>(), j["accounting_violations"].dump().c_str());
    auto s = j["straggler"];
    QCOMPARE(s["delay_ms"].get<int>(), 50);
    for (const char* mode : {"async", "sync"}) {
      expect_run_accounted(s[mode]["healthy"], 3, mode);
      expect_run_accounted(s[mode]["straggler"], 3, mode);
      QVERIFY(s[mode]["ratio"].is_number());
    }
    QCOMPARE(s["sync"]["straggler"]["delay_ms"].get<int>(), 50);
    // One round: its figures are round 1's runs, and their medians are those figures.
    QCOMPARE(s["rounds"].size(), size_t(1));
    const double a_over_s = s["async"]["healthy"]["steps_per_min"].get<double>() /
                            s["sync"]["healthy"]["steps_per_min"].get<double>();
    QVERIFY(std::abs(s["rounds"][0]["async_over_sync_healthy"].get<double>() - a_over_s) < 1e-9 * a_over_s);
    for (const char* k : {"straggler_ratio", "sync_straggler_ratio", "async_over_sync_healthy", "dropped_share_healthy",
                          "dropped_share_straggler"})
      QCOMPARE(s["median"][k].get<double>(), s["rounds"][0][k].get<double>());
    QCOMPARE(s["median"]["straggler_ratio"].get<double>(), s["async"]["ratio"].get<double>());
    QCOMPARE(s["async"]["healthy"]["delay_ms"].get<int>(), 0);
    // Sync mode trains only on rollouts of the current policy: nothing is ever stale.
    QCOMPARE(s["sync"]["healthy"]["dropped_stale_total"].get<int64_t>(), int64_t(0));

    QCOMPARE(j["adapters"].size(), size_t(2));
    for (auto row : j["adapters"]) {
      QVERIFY(row["p50_s"].get<double>() > 0);
      QVERIFY(row["p95_s"].get<double>() >= row["p50_s"].get<double>());
      QVERIFY(row["adapter_bytes"].get<double>() > 0);
    }
    QVERIFY(j["adapters"][1]["adapter_bytes"].get<double>() > j["adapters"][0]["adapter_bytes"].get<double>());

    QCOMPARE(j["scaling"].size(), size_t(2));
    for (size_t n = 0; n < 2; ++n) {
      QCOMPARE(j["scaling"][n]["workers"].get<int64_t>(), int64_t(n + 1));
      QCOMPARE(j["scaling"][n]["completions"].get<int64_t>(), int64_t(8));
      QVERIFY(j["scaling"][n]["completions_per_s"].get<double>() > 0);
    }
  }

  // A short soak: at least one worker is SIGKILLed and restarted, the run goes on, nothing is lost.
  void soakSurvivesKills() {
    const auto r = run_bench({"soak", "--minutes", "0.4", "--workers", "2", "--kill-min-s", "3", "--kill-max-s", "6",
                              "--down-min-s", "0.5", "--down-max-s", "1.5", "--sample-s", "2"},
                             110);
    QVERIFY2(r.exit_code == 0, r.output.constData());
    auto j = r.result;
    QVERIFY2(j.is_object() && j.value("bench", "") == "soak", r.output.constData());
    QVERIFY2(j["ok"].get<bool>(), j.dump().c_str());
    QVERIFY(j["faults_survived"].get<int64_t>() >= 1);
    QCOMPARE(j["samples_lost"].get<int64_t>(), int64_t(0));
    QVERIFY(j["steps"].get<int64_t>() >= 1);
    QVERIFY(j["rss"].size() >= 2);
    QVERIFY(j["rss_mb_at_end"].get<double>() > 0);
    QVERIFY(j.contains("rss_flat"));
  }
};

QTEST_GUILESS_MAIN(TestBenchCluster)
#include "test_bench_cluster.moc"
