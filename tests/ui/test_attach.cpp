// The desktop app attached to a real headless `grpo train --demo --serve 127.0.0.1:0` process
// through its HTTP endpoint (issue 6, Runs: attach): the real window's step label, progress bar
// and chart series grow from the remote metrics; the toolbar's Pause holds the remote step,
// Resume lets it grow again, a retune through the endpoint is accepted (and a bad one refused
// with the server's message); events come through GET /grpo/events (markers, the events list, and
// a fault's advice in the status bar); Stop ends the process with exit status 0. A wrong token and a bad
// URL show their errors in place. Loopback only; every wait is bounded; the child is killed if
// the test leaves early.
#include "tests/common/test_paths.h"
#include <QAction>
#include <QApplication>
#include <QFile>
#include <QListWidget>
#include <QProcess>
#include <QProgressBar>
#include <QSignalSpy>
#include <QStatusBar>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTabWidget>
#include <QUrl>
#include <QtTest>

#include "core/cluster/cluster_token.h"
#include "tests/common/child_process.h"
#include "ui/dashboard_page.h"
#include "ui/main_window.h"
#include "ui/remote_run_client.h"

using namespace grpo::ui;
using grpo::run::EngineState;

namespace {

using Child = grpo::testing::ChildProcess;  // killed if the test leaves early

using grpo::testing::slurp;

}  // namespace

class TestAttach : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void attachFollowsPausesResumesAndStopsARemoteRun() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const QString token_file = tmp.filePath("cluster-token");
    grpo::cluster::load_or_create_token(token_file.toStdString());
    const QString run_dir = tmp.filePath("run");

    Child child;
    const QString out_file = tmp.filePath("stdout.txt"), err_file = tmp.filePath("stderr.txt");
    child.p.setStandardOutputFile(out_file);
    child.p.setStandardErrorFile(err_file);
    child.p.start(GRPO_CLI, {"train", "--demo", "--steps", "400", "--serve", "127.0.0.1:0",
                             "--cluster-token-file", token_file, "--output", run_dir});
    QVERIFY(child.p.waitForStarted(10000));
    const QString url = grpo::testing::wait_for_announced_url(child.p, "serving run on ", 120, out_file);
    QVERIFY2(!url.isEmpty() && QUrl(url).port() > 0, (slurp(out_file) + slurp(err_file)).constData());

    MainWindow w;
    w.resize(1400, 900);
    w.show();

    // Errors in place: a bad URL is refused; a wrong token gets 401s reported by the client.
    QString err;
    QVERIFY(!w.attachRun("ftp://nowhere", token_file, &err));
    QVERIFY2(err.contains("://HOST:PORT"), qPrintable(err));
    QVERIFY(!w.attachRun(url, tmp.filePath("no-such-token"), &err));
    QVERIFY(err.contains("no-such-token"));
    // A pin on http:// protects nothing: refused rather than ignored (issue 18).
    QVERIFY(!w.attachRun(url + "#sha256=" + QString(64, QChar('a')), token_file, &err));
    QVERIFY2(err.contains("needs an https:// URL"), qPrintable(err));
    const QString wrong_token = tmp.filePath("wrong-token");
    grpo::cluster::load_or_create_token(wrong_token.toStdString());  // a different random token
    QVERIFY(w.attachRun(url, wrong_token, &err));
    QTRY_VERIFY_WITH_TIMEOUT(!w.remote()->lastError().isEmpty(), 20000);
    QCOMPARE(w.remote()->step(), int64_t(0));
    w.detachRun();
    QVERIFY(!w.remote()->attached());

    // Attach for real: the dashboard grows like a local run's.
    QVERIFY2(w.attachRun(url, token_file, &err), qPrintable(err));
    QCOMPARE(w.tabs()->currentWidget(), static_cast<QWidget*>(w.dashboard()));
    QVERIFY(!w.startAction()->isEnabled());
    QTRY_VERIFY_WITH_TIMEOUT(w.remote()->step() >= 2, 240000);
    QCOMPARE(w.remote()->maxSteps(), int64_t(400));
    QCOMPARE(w.remote()->runDir(), run_dir);
    MetricChart* reward = w.dashboard()->chart("Reward");
    QVERIFY(reward);
    QTRY_VERIFY_WITH_TIMEOUT(reward->pointCount() >= 2, 10000);
    const size_t n1 = w.dashboard()->store().size("loss");
    QVERIFY(n1 >= 2);
    QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->store().size("loss") >= n1 + 2, 240000);
    QVERIFY(w.statusSummary().contains(QString("/400")));
    QVERIFY(w.progressBar()->value() >= 3);
    QCOMPARE(w.remote()->state(), EngineState::Running);
    QTRY_VERIFY_WITH_TIMEOUT(w.pauseAction()->isEnabled(), 5000);

    // Pause through the toolbar: the remote step holds.
    w.pauseAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(w.remote()->pausePending() || w.remote()->state() == EngineState::Paused, 20000);
    // The engine holds at the next step boundary: until then the client says the pause is pending
    // (the state stays the engine's own, Running), and Resume would cancel it. A slow step (a
    // sanitizer build) can take long, so the wait is generous.
    QTRY_COMPARE_WITH_TIMEOUT(w.remote()->state(), EngineState::Paused, 240000);
    QVERIFY(!w.remote()->pausePending());
    QVERIFY(w.resumeAction()->isEnabled());
    QVERIFY(!w.pauseAction()->isEnabled());
    QTest::qWait(3000);  // a step that was under way lands and is polled
    const int64_t held = w.remote()->step();
    const size_t held_points = w.dashboard()->store().size("loss");
    QTest::qWait(3500);  // three more polls
    QCOMPARE(w.remote()->step(), held);
    QCOMPARE(w.dashboard()->store().size("loss"), held_points);

    // Retune through the endpoint: a good change is accepted, a bad one refused with the reason.
    QSignalSpy retuned(w.remote(), &RemoteRunClient::retuneDone);
    w.remote()->retune({{"learning_rate", 0.002}});
    QTRY_COMPARE_WITH_TIMEOUT(retuned.count(), 1, 20000);
    QCOMPARE(retuned.at(0).at(0).toString(), QString());
    w.remote()->retune({{"learning_rate", -1}});
    QTRY_COMPARE_WITH_TIMEOUT(retuned.count(), 2, 20000);
    QVERIFY(!retuned.at(1).at(0).toString().isEmpty());

    // Resume: the step grows again.
    w.resumeAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(w.remote()->state(), EngineState::Running, 60000);
    QTRY_VERIFY_WITH_TIMEOUT(w.remote()->step() > held, 240000);
    QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->store().size("loss") > held_points, 10000);

    // Events through GET /grpo/events: the remote pause, retune and resume are chart markers and
    // list rows; a fault (the shared convention, with advice) that the run appends to events.jsonl
    // shows its advice in the status bar and the list, and marks the charts.
    auto marker_state = [&] {
      QString d = QString("chart markers %1, store max step %2, remote step %3; store markers:")
                      .arg(reward->markerCount()).arg(w.dashboard()->store().max_step()).arg(w.remote()->step());
      for (const auto& m : w.dashboard()->store().markers()) d += QString(" %1@%2").arg(m.kind).arg(m.step);
      return d.toUtf8();
    };
    QTRY_VERIFY2_WITH_TIMEOUT(reward->markerCount() >= 3, marker_state().constData(), 20000);
    auto* events = w.dashboard()->eventsList();
    for (const char* kind : {"pause", "resume", "retune"}) {
      bool seen = false;
      for (int i = 0; i < events->count(); ++i) seen = seen || events->item(i)->data(Qt::UserRole).toString() == kind;
      QVERIFY2(seen, kind);
    }
    {
      QFile ev(run_dir + "/events.jsonl");
      QVERIFY(ev.open(QIODevice::WriteOnly | QIODevice::Append));
      const std::string fault = R"({"time":1.0,"event":"reward_timeout","severity":"warning","step":)" +
                                std::to_string(w.remote()->step()) +
                                R"(,"message":"reward program ./score.py took over 30 s","advice":"Raise reward_timeout_s or make the program faster."})";
      QVERIFY(ev.write(QByteArray::fromStdString(fault + "\n")) > 0);
    }
    QTRY_VERIFY_WITH_TIMEOUT(w.statusBar()->currentMessage().contains("Raise reward_timeout_s"), 20000);
    QVERIFY(!events->findItems("Raise reward_timeout_s", Qt::MatchContains).isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(reward->markerCount() >= 4, 10000);
    const int rows = events->count();
    QTest::qWait(2500);  // two more polls: nothing is delivered twice
    QCOMPARE(events->count(), rows);

    // Stop: the process saves and exits 0; the client sees the run end.
    QVERIFY(w.stopAction()->isEnabled());
    w.stopAction()->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(child.p.state() == QProcess::NotRunning, 240000);
    QCOMPARE(child.p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(child.p.exitCode() == 0, slurp(err_file).constData());
    QTRY_VERIFY2_WITH_TIMEOUT(w.remote()->state() == EngineState::Finished, qPrintable(w.remote()->lastError()), 20000);
    QVERIFY(!w.pauseAction()->isEnabled());

    // Detach: back to idle.
    w.detachRun();
    QVERIFY(!w.remote()->attached());
    QVERIFY(w.startAction()->isEnabled());
  }
};

QTEST_MAIN(TestAttach)
#include "test_attach.moc"
