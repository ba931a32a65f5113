// The desktop app driven through its real widgets (offscreen) on a real run of the embedded
// demo model: Start, the step count and chart series grow; Pause holds the step; a retune of
// the learning rate through the Retune dialog shows a marker on the charts and the new value;
// Stop; the Adapters page lists the published versions and exports one that `grpo inspect
// logits --adapter` accepts, and pushes one to a loopback stand-in of the Hub (progress in bytes,
// the commit link, the PEFT files in the repo); the finished run reopened in a second window shows its charts.
// A fault appended to events.jsonl reaches the status bar (with its advice), the events list and
// the charts' markers. The live item models run under QAbstractItemModelTester throughout.
#include "tests/common/test_paths.h"
#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QProgressBar>
#include <QListWidget>
#include <QSignalSpy>
#include <QStatusBar>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "core/common/files.h"
#include "core/common/strings.h"
#include "ui/adapters_page.h"
#include "ui/dashboard_page.h"
#include "ui/main_window.h"
#include "ui/retune_dialog.h"
#include "ui/samples_page.h"
#include "ui/setup_page.h"
#include "tests/hub/hub_standin.h"
#include "tests/ui/fast_demo.h"

using namespace grpo::ui;
using grpo::run::EngineState;

namespace {

std::vector<nlohmann::json> read_jsonl(const QString& path) {
  std::vector<nlohmann::json> out;
  for (const auto& line : grpo::split(grpo::read_file(path.toStdString()), '\n'))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

class TestStudio : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void badModelFolderBlocksStartInPlace() {
    MainWindow w;
    w.show();
    QTemporaryDir bad;
    w.setupPage()->setModelFolder(bad.path());
    QVERIFY(!w.startRun());
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(w.setupPage()));
    auto* status = w.setupPage()->findChild<QLabel*>("modelStatus");
    QVERIFY(status->isVisible());
    QVERIFY2(status->text().contains(bad.path()) || status->text().contains("config.json"), qPrintable(status->text()));
    QVERIFY(!w.controller()->active());
  }

  // The model field takes a Hub repo id found in the Hugging Face cache (HF_HUB_CACHE), and says
  // how to get one that is not there; File has "Download from the Hub...".
  void modelFieldTakesACachedRepoId() {
    QTemporaryDir cache;
    const std::string commit(40, 'c');
    const std::string repo = cache.path().toStdString() + "/models--grpo-test--tiny-arith";
    QVERIFY(QDir().mkpath(QString::fromStdString(repo + "/refs")));
    QVERIFY(QDir().mkpath(QString::fromStdString(repo + "/snapshots")));
    grpo::write_file_atomic(repo + "/refs/main", commit);
    QVERIFY(QFile::link(QString(GRPO_RESOURCES) + "/models/tiny-arith",
                        QString::fromStdString(repo + "/snapshots/" + commit)));
    qputenv("HF_HUB_CACHE", cache.path().toUtf8());
    MainWindow w;
    auto* status = w.setupPage()->findChild<QLabel*>("modelStatus");
    w.setupPage()->setModelFolder("grpo-test/tiny-arith");
    QVERIFY2(status->text().contains("llama") || status->text().contains("qwen"), qPrintable(status->text()));
    w.setupPage()->setModelFolder("grpo-test/absent");
    QVERIFY2(status->text().contains("grpo download grpo-test/absent"), qPrintable(status->text()));
    qunsetenv("HF_HUB_CACHE");
    bool has_download = false;
    for (auto* a : w.findChildren<QAction*>()) has_download = has_download || a->text() == "Download from the Hub...";
    QVERIFY(has_download);
  }

  void liveRunStartPauseRetuneStopExportReopen() {
    QTemporaryDir tmp;
    const QString runDir = tmp.filePath("run");
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    QAbstractItemModelTester samplesTester(w.samplesPage()->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester filterTester(w.samplesPage()->filter(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    grpo::testing::configure_fast_demo(w.setupPage(), runDir);
    QVERIFY(w.startAction()->isEnabled());

    // Start: steps arrive, series and the status bar grow.
    w.startAction()->trigger();
    QVERIFY(w.controller()->active());
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(w.dashboard()));
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->step() >= 3, 240000);
    MetricChart* reward = w.dashboard()->chart("Reward");
    MetricChart* lr = w.dashboard()->chart("Learning rate");
    QVERIFY(reward && lr);
    QTRY_VERIFY_WITH_TIMEOUT(reward->pointCount() >= 3, 10000);
    const size_t n1 = w.dashboard()->store().size("reward");
    const int p1 = reward->pointCount();
    QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->store().size("reward") >= n1 + 2, 240000);
    QTRY_VERIFY_WITH_TIMEOUT(reward->pointCount() > p1, 10000);
    QVERIFY(w.dashboard()->store().size("loss") >= n1 + 2);
    QVERIFY(w.statusSummary().contains("step"));
    QVERIFY(w.progressBar()->value() >= 3);
    QVERIFY(!w.dashboard()->verdictText().isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(w.samplesPage()->model()->rowCount() > 0, 10000);
    QVERIFY(w.pauseAction()->isEnabled());

    // Pause: the engine stops at a step boundary and the step holds.
    w.pauseAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->state(), EngineState::Paused, 120000);
    QVERIFY(w.resumeAction()->isEnabled());
    QVERIFY(!w.pauseAction()->isEnabled());
    const int64_t held = w.controller()->step();
    const size_t held_points = w.dashboard()->store().size("loss");
    QTest::qWait(1500);
    QCOMPARE(w.controller()->step(), held);
    QCOMPARE(w.dashboard()->store().size("loss"), held_points);
    QTRY_VERIFY_WITH_TIMEOUT(reward->markerCount() >= 1, 5000);  // the pause marker

    // Retune the learning rate through the dialog (modal: driven from a timer).
    bool dialog_seen = false;
    QTimer::singleShot(300, this, [&] {
      auto* d = qobject_cast<RetuneDialog*>(QApplication::activeModalWidget());
      if (!d) return;
      dialog_seen = true;
      QCOMPARE(d->field("learning_rate")->text(), QString("0.001"));
      d->field("learning_rate")->setText("0.004");
      if (d->apply()) d->accept();
      else d->reject();
    });
    w.retuneAction()->trigger();
    QVERIFY(dialog_seen);
    w.resumeAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->state(), EngineState::Running, 60000);
    QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->store().last("learning_rate") == 0.004, 240000);
    QTRY_VERIFY_WITH_TIMEOUT(lr->markerCount() >= 3, 10000);  // pause, resume, retune
    bool retune_marker = false;
    for (const auto& m : w.dashboard()->store().markers())
      retune_marker = retune_marker || (m.kind == "retune" && m.text.contains("learning_rate") && m.text.contains("0.004"));
    QVERIFY(retune_marker);

    // A fault (the shared convention: severity, message, advice), as the engine appends it to
    // events.jsonl: the status bar shows its advice, the events list holds it, every chart marks it.
    {
      QFile ev(runDir + "/events.jsonl");
      QVERIFY(ev.open(QIODevice::WriteOnly | QIODevice::Append));
      const nlohmann::json fault = {{"time", 1.0}, {"event", "bucket_write_failed"}, {"severity", "error"},
                                    {"step", w.controller()->step()}, {"message", "metrics.jsonl: No space left on device"},
                                    {"advice", "Free space on the run's disk; the run goes on by itself."}};
      QVERIFY(ev.write(QByteArray::fromStdString(fault.dump() + "\n")) > 0);
    }
    QTRY_VERIFY_WITH_TIMEOUT(w.statusBar()->currentMessage().contains("Free space on the run's disk"), 10000);
    QVERIFY(w.statusBar()->currentMessage().contains("No space left"));
    auto* events = w.dashboard()->eventsList();
    QVERIFY(!events->findItems("Free space on the run's disk", Qt::MatchContains).isEmpty());
    QVERIFY(!events->findItems("retune", Qt::MatchContains).isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(lr->markerCount() >= 4, 10000);
    bool fault_marker = false;
    for (const auto& m : w.dashboard()->store().markers())
      fault_marker = fault_marker || (m.kind == "bucket_write_failed" && m.severity == "error" && m.text.contains("Free space"));
    QVERIFY(fault_marker);

    // Stop: the final checkpoint and adapter; the run's files say so.
    QSignalSpy done(&w, &MainWindow::runFinished);
    w.stopAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 240000);
    QCOMPARE(done.at(0).at(1).toString(), QString());
    QVERIFY(!w.controller()->active());
    QVERIFY(w.startAction()->isEnabled());
    const QString adapter = done.at(0).at(0).toString();
    QVERIFY(grpo::file_exists(adapter.toStdString() + "/adapter_model.safetensors"));
    bool saw_retune = false, saw_pause = false, saw_stop = false;
    for (const auto& e : read_jsonl(runDir + "/events.jsonl")) {
      const std::string k = e.value("event", "");
      saw_pause = saw_pause || k == "pause";
      saw_stop = saw_stop || k == "stop";
      saw_retune = saw_retune || (k == "retune" && e["new"]["learning_rate"] == 0.004 && e["old"]["learning_rate"] == 0.001);
    }
    QVERIFY(saw_pause && saw_retune && saw_stop);
    const auto metrics = read_jsonl(runDir + "/metrics.jsonl");
    QCOMPARE(int64_t(metrics.size()), w.controller()->step());
    QCOMPARE(w.dashboard()->store().size("reward"), metrics.size());
    QVERIFY(!read_jsonl(runDir + "/samples.jsonl").empty());

    // Adapters: published versions and checkpoints; export the newest version.
    AdaptersPage* ap = w.adaptersPage();
    QTRY_VERIFY_WITH_TIMEOUT(ap->rowCount() >= 2, 5000);
    QCOMPARE(ap->table()->item(0, 0)->text(), QString("version"));
    const QString out = tmp.filePath("export-peft");
    QSignalSpy exported(ap, &AdaptersPage::exportFinished);
    QString err;
    QVERIFY2(ap->startExport(0, out, false, "f32", &err), qPrintable(err));
    QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 1, 120000);
    QCOMPARE(exported.at(0).at(1).toString(), QString());
    QVERIFY(grpo::file_exists(out.toStdString() + "/adapter_config.json"));
    const QString model = QString(GRPO_RESOURCES) + "/models/tiny-arith";
    auto logits = [&](const QStringList& extra) {
      QProcess p;
      p.start(GRPO_CLI, QStringList{"inspect", "logits", "--model", model, "--ids", "1,2,3", "--last"} + extra);
      if (!p.waitForFinished(120000)) return std::string("timeout");
      return p.exitCode() == 0 ? p.readAllStandardOutput().toStdString() : "exit " + std::to_string(p.exitCode());
    };
    const std::string base = logits({}), tuned = logits({"--adapter", out});
    QVERIFY2(base.rfind("exit", 0) != 0 && tuned.rfind("exit", 0) != 0, (base.substr(0, 80) + tuned.substr(0, 80)).c_str());
    QVERIFY(base != tuned);  // the trained adapter changes the logits

    // Push to Hub: the newest version exported into a fresh folder and pushed to a loopback
    // stand-in of the Hub (HF_ENDPOINT, HF_TOKEN as a user sets them), which checks every request.
    {
      hub_test::HubStandIn hub;
      hub.set_upload_token("hf_studio_token");
      qputenv("HF_ENDPOINT", QByteArray::fromStdString(hub.url()));
      qputenv("HF_TOKEN", "hf_studio_token");
      QSignalSpy pushed(ap, &AdaptersPage::pushFinished);
      QSignalSpy progress(ap, &AdaptersPage::pushProgress);
      AdaptersPage::PushRequest req;
      req.repoId = "org/studio";
      req.message = "from the app";
      QVERIFY2(ap->startPush(0, req, &err), qPrintable(err));
      QTRY_COMPARE_WITH_TIMEOUT(pushed.count(), 1, 120000);
      QCOMPARE(pushed.at(0).at(1).toString(), QString());
      const QString url = pushed.at(0).at(0).toString();
      QVERIFY2(url.startsWith(QString::fromStdString(hub.url()) + "/org/studio/commit/"), qPrintable(url));
      QVERIFY(progress.count() >= 1);
      QVERIFY(progress.last().at(1).toLongLong() > 0);
      QCOMPARE(progress.last().at(0).toLongLong(), progress.last().at(1).toLongLong());
      const auto st = hub.upload_stats();
      QVERIFY2(st.violations.empty(), st.violations.empty() ? "" : st.violations.front().constData());
      QCOMPARE(st.commit_log.back().summary, QByteArray("from the app"));
      bool has_cfg = false, has_weights = false, has_card = false;
      for (const auto& f : hub.repo("models/org/studio").files) {
        has_cfg = has_cfg || f.path == "adapter_config.json";
        has_weights = has_weights || (f.path == "adapter_model.safetensors" && f.lfs);
        has_card = has_card || (f.path == "README.md" && f.content.contains("library_name: peft"));
      }
      QVERIFY(has_cfg && has_weights && has_card);
      QVERIFY(ap->findChild<QLabel*>("pushStatus")->text().contains("href=\"" + url.toHtmlEscaped() + "\""));
      // A repo id the Hub would refuse is refused at once, before anything is exported.
      AdaptersPage::PushRequest bad;
      bad.repoId = "bad//id";
      QVERIFY(!ap->startPush(0, bad, &err));
      QVERIFY2(err.contains("repo id"), qPrintable(err));
      qunsetenv("HF_ENDPOINT");
      qunsetenv("HF_TOKEN");
    }

    // Reopen the finished run in a fresh window: its charts come from the files.
    MainWindow w2;
    w2.resize(1400, 900);
    w2.show();
    QVERIFY(w2.openRun(runDir));
    QCOMPARE(w2.dashboard()->store().size("reward"), metrics.size());
    MetricChart* reward2 = w2.dashboard()->chart("Reward");
    QVERIFY(reward2->pointCount() >= int(metrics.size()));
    QVERIFY(reward2->markerCount() >= 3);
    QVERIFY(w2.samplesPage()->model()->rowCount() > 0);
    QVERIFY(w2.adaptersPage()->rowCount() >= 2);
    QVERIFY(!w2.openRun(tmp.filePath("nothing-here")));

    // Chart export: PNG and CSV of a real chart.
    QVERIFY(reward2->savePng(tmp.filePath("reward.png")));
    QVERIFY(QImage(tmp.filePath("reward.png")).width() > 100);
    QVERIFY(reward2->saveCsv(tmp.filePath("reward.csv")));
    const auto csv = grpo::split(grpo::read_file(tmp.filePath("reward.csv").toStdString()), '\n');
    QVERIFY(csv.front().rfind("step,reward", 0) == 0);
  }
};

QTEST_MAIN(TestStudio)
#include "test_studio.moc"
