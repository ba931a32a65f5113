// The desktop app serving its own run to a browser (issue 19: "the desktop app for its own run, as
// an option"): Run > Serve in browser on a live demo run starts the run's HTTP endpoint (the same
// RunEndpoint as `grpo train --serve`); the status bar shows the link, whose fragment carries the
// cluster token. Checked over real loopback HTTP: the page is public and every data route needs the
// token; the run's state, the MFU series and pause/resume through the browser's routes act on the
// desktop run; serving stops on request (the port closes, the run goes on) and ends with the run.
// Bad addresses and a second endpoint are refused in place. Every wait is bounded.
#include <QAction>
#include <QApplication>
#include <QLabel>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>

#include "core/common/files.h"
#include "core/common/strings.h"
#include "tests/common/raw_http.h"
#include "tests/ui/fast_demo.h"
#include "ui/dashboard_page.h"
#include "ui/main_window.h"
#include "ui/metric_chart.h"

using namespace grpo::ui;
using grpo::run::EngineState;
using grpo::testing::request;

namespace {

int port_of(const QString& link) { return QUrl(link).port(); }

QByteArray token_of(const QString& link) {
  const int at = link.indexOf("#token=");
  return at < 0 ? QByteArray() : link.mid(at + 7).toUtf8();
}

}  // namespace

class TestServe : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void appServesItsOwnRunToTheBrowser() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    qputenv("XDG_CONFIG_HOME", tmp.filePath("config").toUtf8());  // the token made on first use goes here
    const QString runDir = tmp.filePath("run");
    MainWindow w;
    w.resize(1400, 900);
    w.show();
    grpo::testing::configure_fast_demo(w.setupPage(), runDir);

    // Nothing to serve before a run.
    QString err;
    QVERIFY(!w.serveAction()->isEnabled());
    QVERIFY(!w.serveInBrowser("127.0.0.1:0", &err));
    QVERIFY2(err.contains("no run is active"), qPrintable(err));

    w.startAction()->trigger();
    QVERIFY(w.controller()->active());
    QVERIFY(w.serveAction()->isEnabled());
    QVERIFY(!w.serveInBrowser("127.0.0.1", &err));  // no port
    QVERIFY2(err.contains("serve address"), qPrintable(err));
    QVERIFY(!w.servingLabel()->isVisible());

    // Asked while the model may still be loading: it serves once the engine exists.
    QSignalSpy serving(w.controller(), &EngineController::servingChanged);
    QVERIFY2(w.serveInBrowser("127.0.0.1:0", &err), qPrintable(err));
    QTRY_VERIFY_WITH_TIMEOUT(serving.count() >= 1, 120000);
    QVERIFY2(serving.at(0).at(1).toString().isEmpty(), qPrintable(serving.at(0).at(1).toString()));
    QVERIFY(w.servingLabel()->isVisible());
    const QString link = w.controller()->servingLink();
    const int port = port_of(link);
    const QByteArray token = token_of(link);
    QVERIFY2(link.startsWith("http://127.0.0.1:") && port > 0, qPrintable(link));
    const std::string token_file = tmp.filePath("config/grpo-studio/cluster-token").toStdString();
    QCOMPARE(token.toStdString(), grpo::trim(grpo::read_file(token_file)));
    QVERIFY(w.servingLabel()->text().contains(link.toHtmlEscaped()));
    QCOMPARE(w.serveAction()->text(), QString("Browser view..."));
    QVERIFY(!w.serveInBrowser("127.0.0.1:0", &err));
    QVERIFY2(err.contains("already serving"), qPrintable(err));

    // The page is public and carries no data; every data route needs the token.
    const auto page = request(port, "GET", "/", "");
    QCOMPARE(page.status, 200);
    QVERIFY(page.body.contains("data-metric=\"step\""));
    QCOMPARE(request(port, "GET", "/grpo/run", "").status, 401);
    QCOMPARE(request(port, "GET", "/grpo/dashboard/state", "").status, 401);
    QCOMPARE(request(port, "POST", "/grpo/run/pause", "", "{}").status, 401);
    QCOMPARE(request(port, "GET", "/grpo/run", "wrong-token").status, 401);

    // With the token: the desktop run's own state, and its MFU series for the browser's chart.
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->step() >= 2, 240000);
    const auto run = request(port, "GET", "/grpo/run", token);
    QCOMPARE(run.status, 200);
    QCOMPARE(QString::fromStdString(run.j().value("run_dir", std::string())), runDir);
    QVERIFY(run.j().value("step", int64_t{0}) >= 1);
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          const auto s = request(port, "GET", "/grpo/dashboard/series?keys=perf/mfu_fwd_bwd,perf/mfu_wall_clock", token).j();
          if (!s.is_object() || !s.contains("series") || !s["series"].contains("perf/mfu_fwd_bwd")) return false;
          for (const auto& v : s["series"]["perf/mfu_fwd_bwd"])
            if (v.is_number() && v.get<double>() > 0) return true;
          return false;
        }(),
        60000);

    // The browser view and this window draw the same charts: the catalogue the page gets from the
    // run's endpoint lists the desktop Dashboard's charts, ids and titles, in the same order.
    QCOMPARE(request(port, "GET", "/grpo/dashboard/charts", "").status, 401);
    const auto served = request(port, "GET", "/grpo/dashboard/charts", token);
    QCOMPARE(served.status, 200);
    const nlohmann::json catalogue = served.j();
    const auto& ids = w.dashboard()->chartIds();
    QVERIFY2(catalogue.is_array() && catalogue.size() == ids.size() && ids.size() == w.dashboard()->charts().size(),
             catalogue.dump().c_str());
    for (size_t i = 0; i < ids.size(); ++i) {
      QCOMPARE(catalogue[i].value("id", std::string()), ids[i]);
      QCOMPARE(QString::fromStdString(catalogue[i].value("title", std::string())), w.dashboard()->charts()[i]->title());
    }

    // Pause and resume through the browser's routes act on the desktop run.
    QCOMPARE(request(port, "POST", "/grpo/run/pause", token, "{}").status, 200);
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->state(), EngineState::Paused, 240000);
    QCOMPARE(request(port, "POST", "/grpo/run/resume", token, "{}").status, 200);
    QTRY_COMPARE_WITH_TIMEOUT(w.controller()->state(), EngineState::Running, 60000);

    // Stop serving: the port closes, the run goes on.
    w.controller()->stopServing();
    QTRY_VERIFY_WITH_TIMEOUT(!w.servingLabel()->isVisible(), 10000);
    QCOMPARE(w.controller()->servingLink(), QString());
    QCOMPARE(request(port, "GET", "/grpo/run", token).status, 0);
    QVERIFY(w.controller()->active());
    const int64_t step_then = w.controller()->step();
    QTRY_VERIFY_WITH_TIMEOUT(w.controller()->step() > step_then, 240000);

    // Serve again, then stop the run: serving ends with it.
    QVERIFY2(w.serveInBrowser("127.0.0.1:0", &err), qPrintable(err));
    QTRY_VERIFY_WITH_TIMEOUT(w.servingLabel()->isVisible(), 20000);
    const int port2 = port_of(w.controller()->servingLink());
    QCOMPARE(request(port2, "GET", "/grpo/run", token).status, 200);
    QSignalSpy done(&w, &MainWindow::runFinished);
    w.stopAction()->trigger();
    QTRY_COMPARE_WITH_TIMEOUT(done.count(), 1, 240000);
    QVERIFY(!w.servingLabel()->isVisible());
    QCOMPARE(request(port2, "GET", "/grpo/run", token).status, 0);
    QVERIFY(!w.serveAction()->isEnabled());
  }
};

QTEST_MAIN(TestServe)
#include "test_serve.moc"
