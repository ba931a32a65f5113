// The Workers page on a live run whose rollouts all come from 2 real `grpo worker` processes (no
// local generators), driven through the real window: the table shows both workers as the run's
// router sees them (status up, the adapter version they hold, tokens flowing); Drain on one
// stops new dispatches to it (its dispatch count holds while the other's grows) and its requests
// in flight finish; Resume puts it back in rotation; Pause reaches the worker itself
// (GET /is_paused says true) and Resume undoes it; Remove takes it out of the table and the run
// goes on with the other; adding it back by URL brings it back up. The model runs under
// QAbstractItemModelTester throughout. Loopback only; every wait is bounded.
#include "tests/common/test_paths.h"
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QLineEdit>
#include <QNetworkAccessManager>
#include <QProcess>
#include <QPushButton>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>

#include <map>
#include <memory>

#include "core/cluster/cluster_token.h"
#include "core/cluster/worker_client.h"
#include "tests/common/child_process.h"
#include "ui/main_window.h"
#include "ui/setup_page.h"
#include "ui/workers_page.h"

using namespace grpo::ui;

namespace {

using Child = grpo::testing::ChildProcess;  // killed if the test leaves early

// Starts `grpo worker` on loopback and returns its URL ("" when it did not announce one in 60 s).
QString start_worker(Child& c, const QString& bucket, const QString& token_file, const QString& name) {
  c.p.setProcessChannelMode(QProcess::SeparateChannels);
  c.p.start(GRPO_CLI, {"worker", "--model", QString(GRPO_RESOURCES) + "/models/tiny-arith", "--listen",
                       "127.0.0.1:0", "--token-file", token_file, "--bucket", bucket, "--threads", "1", "--name", name});
  if (!c.p.waitForStarted(10000)) return {};
  return grpo::testing::wait_for_announced_url(c.p, "listening on ", 60);
}

WorkerRow row_of(WorkersPage* page, const QString& url) {
  const int i = page->model()->find(url);
  return i < 0 ? WorkerRow{} : page->model()->rows()[static_cast<size_t>(i)];
}

void select(WorkersPage* page, const QString& url) {
  auto* view = page->findChild<QTableView*>("workersView");
  view->selectRow(page->model()->find(url));
}

void click(WorkersPage* page, const char* button) { page->findChild<QPushButton*>(button)->click(); }

// The newest router snapshot per URL, as the controller delivers them (the page shows a command's
// effect at once; these say what the router itself reported).
struct Snapshots {
  std::map<QString, grpo::run::WorkerInfo> last;
  grpo::run::WorkerInfo operator[](const QString& url) const {
    auto it = last.find(url);
    return it == last.end() ? grpo::run::WorkerInfo{} : it->second;
  }
};

}  // namespace

class TestWorkers : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void liveRouterDrainPauseRemoveAdd() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    // The run reads the default token path: point it into the temporary directory.
    qputenv("XDG_CONFIG_HOME", tmp.filePath("config").toUtf8());
    const QString token_file = QString::fromStdString(grpo::cluster::default_token_path());
    const std::string token = grpo::cluster::load_or_create_token(token_file.toStdString());
    QVERIFY(token_file.startsWith(tmp.path()));

    Child ca, cb;
    const QString a = start_worker(ca, tmp.path(), token_file, "wa");
    const QString b = start_worker(cb, tmp.path(), token_file, "wb");
    QVERIFY2(!a.isEmpty() && !b.isEmpty(), "grpo worker did not print its URL");

    MainWindow w;
    w.resize(1400, 900);
    w.show();
    WorkersPage* page = w.workersPage();
    QAbstractItemModelTester tester(page->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(page->addUrl(a), QString());
    QCOMPARE(page->addUrl(b), QString());
    QCOMPARE(row_of(page, a).status, QString("added"));
    // Without a live run, Drain/Pause/Resume have nowhere to go.
    select(page, a);
    QVERIFY(!page->findChild<QPushButton*>("drainWorker")->isEnabled());

    SetupPage* s = w.setupPage();
    s->loadPreset("demo");
    const std::vector<std::pair<std::string, QString>> values = {
        {"num_generations", "4"}, {"prompts_per_step", "2"}, {"max_completion_length", "8"}, {"max_steps", "2000"},
        {"eval_steps", "0"},      {"save_steps", "0"},       {"weight_sync_steps", "2"},    {"local_generators", "0"}};
    for (const auto& [k, v] : values) {
      QVERIFY2(s->field(k), k.c_str());
      s->field(k)->setText(v);
    }
    s->setRunDirectory(tmp.filePath("run"));
    Snapshots snap;
    QObject receiver;  // declared after `snap`: disconnected before it goes
    connect(w.controller(), &EngineController::workersReady, &receiver, [&](const QVector<grpo::run::WorkerInfo>& ws) {
      for (const auto& i : ws) snap.last[QString::fromStdString(i.url)] = i;
    });
    QVERIFY(w.startRun());

    // Both workers up, as the router sees them, with requests and tokens flowing and a policy
    // version loaded; the table shows the same.
    QTRY_VERIFY_WITH_TIMEOUT(snap[a].status == "up" && snap[b].status == "up", 240000);
    QTRY_VERIFY_WITH_TIMEOUT(snap[a].dispatched + snap[b].dispatched >= 8, 240000);
    QTRY_VERIFY_WITH_TIMEOUT(snap[a].tokens + snap[b].tokens > 0, 60000);
    QTRY_VERIFY_WITH_TIMEOUT(snap[a].adapter_version >= 1 && snap[b].adapter_version >= 1, 240000);
    QTRY_VERIFY_WITH_TIMEOUT(row_of(page, a).adapterVersion >= 1 && row_of(page, b).status == "up", 10000);
    QCOMPARE(row_of(page, a).name, QString("127.0.0.1:%1").arg(QUrl(a).port()));
    QCOMPARE(page->model()->rowCount(), 2);

    // Drain a: no new dispatches to it; what it had in flight finishes; b takes everything.
    select(page, a);
    QVERIFY(page->findChild<QPushButton*>("drainWorker")->isEnabled());
    click(page, "drainWorker");
    QCOMPARE(row_of(page, a).status, QString("draining"));  // shown at once
    QTRY_VERIFY_WITH_TIMEOUT(snap[a].status == "draining" && snap[a].inflight == 0, 120000);
    const int64_t a_drained = snap[a].dispatched;
    const int64_t b_before = snap[b].dispatched;
    QTRY_VERIFY_WITH_TIMEOUT(snap[b].dispatched >= b_before + 16, 240000);
    QCOMPARE(snap[a].dispatched, a_drained);
    QCOMPARE(row_of(page, a).status, QString("draining"));

    // Resume a: back in rotation.
    select(page, a);
    click(page, "resumeWorker");
    QTRY_VERIFY_WITH_TIMEOUT(snap[a].status == "up" && row_of(page, a).status == "up", 60000);
    QTRY_VERIFY_WITH_TIMEOUT(snap[a].dispatched > a_drained, 240000);

    // Pause b: the router stops sending and the worker itself is paused (its own /is_paused).
    QNetworkAccessManager nam;
    grpo::cluster::WorkerClient client_b(&nam, b.toStdString(), token);
    select(page, b);
    click(page, "pauseWorker");
    QTRY_VERIFY_WITH_TIMEOUT(snap[b].status == "paused" && row_of(page, b).status == "paused", 60000);
    QTRY_VERIFY_WITH_TIMEOUT(client_b.get_sync("/is_paused", 10).body.find("true") != std::string::npos, 60000);
    select(page, b);
    click(page, "resumeWorker");
    QTRY_VERIFY_WITH_TIMEOUT(snap[b].status == "up", 60000);
    QTRY_VERIFY_WITH_TIMEOUT(client_b.get_sync("/is_paused", 10).body.find("false") != std::string::npos, 60000);

    // Remove a: it leaves the table and stays gone; the run goes on with b.
    select(page, a);
    click(page, "removeWorker");
    QCOMPARE(page->model()->find(a), -1);
    const int64_t step = w.controller()->step();
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->step() >= step + 2, 240000);
    QCOMPARE(page->model()->find(a), -1);

    // Add it back by URL: the live router takes it up again.
    auto* url = page->findChild<QLineEdit*>("workerUrl");
    url->setText(a);
    QTest::keyClick(url, Qt::Key_Return);
    QVERIFY(page->model()->find(a) >= 0);
    QTRY_VERIFY_WITH_TIMEOUT(row_of(page, a).status == "up", 120000);
    QCOMPARE(snap[a].status, std::string("up"));

    w.controller()->stop();
    QTRY_VERIFY_WITH_TIMEOUT(!w.controller()->active(), 240000);
    QVERIFY2(w.controller()->lastError().isEmpty(), qPrintable(w.controller()->lastError()));
  }
};

QTEST_MAIN(TestWorkers)
#include "test_workers.moc"
