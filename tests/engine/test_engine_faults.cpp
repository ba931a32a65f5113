// Fault test: a real `grpo train` process is killed with SIGKILL at random moments, several
// rounds, then resumed until it finishes. The run must complete with a continuous step count,
// and nothing in the bucket may be torn: every published adapter matches its SHA256SUMS, every
// checkpoint is intact, and no half-written temporary directory is visible as a version.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <random>

#include "core/records/run_dir.h"
#include "core/run/checkpoint.h"
#include "engine_test_util.h"

using namespace engine_test;

namespace {
// Lines of a JSONL file that parse (a torn last line does not count); 0 if absent.
size_t read_jsonl_lenient(const std::string& path) {
  if (!grpo::file_exists(path)) return 0;
  size_t n = 0;
  for (const auto& line : grpo::split(grpo::read_file(path), '\n'))
    if (!line.empty() && !nlohmann::json::parse(line, nullptr, false).is_discarded()) ++n;
  return n;
}
}  // namespace

class TestEngineFaults : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void killNineAndResume() {
    QTemporaryDir tmp;
    const std::string run_dir = tmp.path().toStdString() + "/run";
    auto cfg = tiny_config(run_dir);
    // Steps of the tiny model take milliseconds: enough of them that four kills, each 1-3 steps
    // plus up to 150 ms after the previous start, always land before the run's end.
    cfg.max_steps = 120;
    cfg.save_steps = 3;
    cfg.max_completion_length = 8;
    const std::string cfg_path = tmp.path().toStdString() + "/run.json";
    auto j = cfg.to_json();
    j["output_dir"] = run_dir;
    grpo::write_file_atomic(cfg_path, j.dump(2));

    std::mt19937 rng(20261129);
    const int kills = 4;
    int round = 0;
    bool finished = false;
    for (; round < kills + 3 && !finished; ++round) {  // bounded: kills, then up to 3 clean runs
      QProcess p;
      p.setProcessChannelMode(QProcess::MergedChannels);
      QStringList args = round == 0 ? QStringList{"train", QString::fromStdString(cfg_path)}
                                    : QStringList{"train", "--resume", QString::fromStdString(run_dir)};
      p.start(GRPO_CLI, args);
      QVERIFY2(p.waitForStarted(10000), "grpo train did not start");
      if (round < kills) {
        // Kill mid-run: once the run has trained 1-3 more steps (read from its own metrics.jsonl),
        // after a random extra delay, so kills land in steps, publications and checkpoints.
        const size_t start = read_jsonl_lenient(run_dir + "/metrics.jsonl");
        const size_t target = start + 1 + rng() % 3;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        while (read_jsonl_lenient(run_dir + "/metrics.jsonl") < target && std::chrono::steady_clock::now() < deadline &&
               p.state() == QProcess::Running)
          QTest::qWait(20);
        QTest::qWait(static_cast<int>(rng() % 150));
        QVERIFY2(p.state() == QProcess::Running,
                 qPrintable("grpo train ended before it could be killed: " + QString::fromUtf8(p.readAll())));
        p.kill();  // SIGKILL
        QVERIFY(p.waitForFinished(10000));
        qInfo("round %d: killed at about step %zu", round, read_jsonl_lenient(run_dir + "/metrics.jsonl"));
        continue;
      } else {
        QVERIFY2(p.waitForFinished(600000), "grpo train did not finish within 10 minutes");
      }
      const QByteArray out = p.readAll();
      QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, out.constData());
      finished = true;
    }
    QVERIFY2(finished, "the run never completed");

    // Continuous step count: exactly 1..max_steps, no gaps, no duplicates.
    auto metrics = read_jsonl(run_dir + "/metrics.jsonl");
    QString steps;
    for (const auto& m : metrics) steps += QString::number(m["step"].get<int64_t>()) + " ";
    QVERIFY2(metrics.size() == size_t(cfg.max_steps), qPrintable("steps in metrics.jsonl: " + steps + "\nevents: " +
                                                             QString::fromStdString(grpo::read_file(run_dir + "/events.jsonl"))));
    for (size_t i = 0; i < metrics.size(); ++i) QCOMPARE(metrics[i]["step"].get<int64_t>(), int64_t(i + 1));
    // Nothing torn in the bucket.
    grpo::run::RunDirectory dir(run_dir);
    auto versions = dir.adapter_versions();
    QVERIFY(!versions.empty());
    for (int64_t v : versions) {
      auto bad = grpo::run::verify_sha256sums(dir.adapter_dir(v));
      QVERIFY2(bad.empty(), qPrintable(QString("policy-v%1: %2").arg(v).arg(QString::fromStdString(grpo::join(bad, ",")))));
    }
    for (const auto& e : QDir(QString::fromStdString(run_dir + "/checkpoints")).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
      QVERIFY2(!e.startsWith(".tmp"), qPrintable(e));
      QVERIFY2(grpo::run::verify_sha256sums(run_dir + "/checkpoints/" + e.toStdString()).empty(), qPrintable(e));
    }
    QVERIFY(QDir(QString::fromStdString(run_dir + "/adapters")).entryList(QStringList{".tmp*"}, QDir::Dirs | QDir::Hidden).isEmpty());
    QCOMPARE(events_named(run_dir, "finished").size(), size_t(1));
  }
};

QTEST_GUILESS_MAIN(TestEngineFaults)
#include "test_engine_faults.moc"
