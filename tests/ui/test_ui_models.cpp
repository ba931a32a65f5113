// The UI's data side without an engine: MetricStore bounds and min/max downsampling checked
// against a brute-force reference, CSV export, the item models under QAbstractItemModelTester,
// the setup page's in-place validation (a bad model folder, an out-of-range value), and the
// retune dialog's handling of a refusal.
#include "tests/common/test_paths.h"
#include <QAbstractItemModelTester>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QTableView>
#include <QValueAxis>
#include <QSettings>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <random>

#include "ui/dashboard_page.h"
#include "ui/metric_chart.h"
#include "ui/metric_store.h"
#include "ui/retune_dialog.h"
#include "ui/samples_page.h"
#include "ui/setup_page.h"

using json = nlohmann::json;
#include "ui/workers_page.h"
#ifdef GRPO_UI_WITH_CLUSTER_TEST
#include "core/api/charts.h"
#include "core/api/run_folder.h"
#include "core/cluster/beacon.h"
#include "core/cluster/cluster_token.h"
#include "core/cluster/discovery.h"
#endif

using namespace grpo::ui;

class TestUiModels : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void downsampleKeepsEveryBucketsExtremes() {
    MetricStore s;
    std::mt19937 rng(3);
    std::normal_distribution<double> noise(0, 1);
    const int n = 100000;
    std::vector<double> y(n);
    for (int i = 0; i < n; ++i) {
      y[i] = std::sin(i * 0.001) + 0.1 * noise(rng) + (i == 54321 ? 25.0 : 0.0);  // one spike
      s.add(i + 1, "reward", y[i]);
    }
    QCOMPARE(s.size("reward"), size_t(n));
    const int buckets = 500;
    auto pts = s.downsample("reward", 0, n + 1, buckets);
    QVERIFY(pts.size() <= 2 * buckets);
    QVERIFY(pts.size() >= buckets);
    // Reference: the global min and max, and the spike, survive.
    const double gmin = *std::min_element(y.begin(), y.end()), gmax = *std::max_element(y.begin(), y.end());
    double dmin = 1e300, dmax = -1e300;
    bool spike = false;
    for (int i = 0; i < pts.size(); ++i) {
      dmin = std::min(dmin, pts[i].y());
      dmax = std::max(dmax, pts[i].y());
      spike = spike || pts[i].x() == 54322;
      if (i > 0) QVERIFY(pts[i].x() > pts[i - 1].x());  // x order
    }
    QCOMPARE(dmin, gmin);
    QCOMPARE(dmax, gmax);
    QVERIFY(spike);
    // Each bucket's extremes equal a brute-force scan of that bucket.
    for (int k : {0, 137, 499}) {
      const size_t lo = size_t(n) * k / buckets, hi = size_t(n) * (k + 1) / buckets;
      const double bmin = *std::min_element(y.begin() + lo, y.begin() + hi);
      const double bmax = *std::max_element(y.begin() + lo, y.begin() + hi);
      bool has_min = false, has_max = false;
      for (const auto& p : pts)
        if (p.x() >= lo + 1 && p.x() <= hi) {
          has_min = has_min || p.y() == bmin;
          has_max = has_max || p.y() == bmax;
        }
      QVERIFY2(has_min && has_max, qPrintable(QString("bucket %1").arg(k)));
    }
    // Few points: all of them, unchanged.
    auto few = s.downsample("reward", 10, 20, buckets);
    QCOMPARE(few.size(), 11);
    QCOMPARE(few.front().y(), y[9]);
  }

  void storeIsBoundedAndResumeReplaces() {
    MetricStore s;
    for (size_t i = 1; i <= MetricStore::kMaxPoints + 10; ++i) s.add(double(i), "x", double(i));
    QVERIFY(s.size("x") <= MetricStore::kMaxPoints);
    QCOMPARE(s.last("x"), double(MetricStore::kMaxPoints + 10));
    MetricStore r;
    for (int i = 1; i <= 10; ++i) r.add(i, "loss", i);
    r.add(6, "loss", -1);  // a resumed run replays from step 6
    QCOMPARE(r.size("loss"), size_t(6));
    QCOMPARE(r.last("loss"), -1.0);
    r.add(7, "loss", NAN);  // skipped
    QCOMPARE(r.size("loss"), size_t(6));
    for (size_t i = 0; i < MetricStore::kMaxMarkers + 5; ++i) r.add_marker({double(i), "pause", ""});
    QCOMPARE(r.markers().size(), MetricStore::kMaxMarkers);
  }

  void bandAndCsv() {
    MetricStore s;
    for (int i = 1; i <= 4; ++i) {
      s.add(i, "reward", i * 0.25);
      s.add(i, "reward_std", 0.1);
    }
    s.add(2, "eval/accuracy", 0.5);
    QVector<QPointF> up, down;
    s.band("reward", "reward_std", 0, 10, 100, up, down);
    QCOMPARE(up.size(), 4);
    QVERIFY(std::fabs(up[1].y() - 0.6) < 1e-12);
    QVERIFY(std::fabs(down[1].y() - 0.4) < 1e-12);
    const std::string csv = s.to_csv({"reward", "eval/accuracy"});
    QCOMPARE(QString::fromStdString(csv), QString("step,reward,eval/accuracy\n1,0.25,\n2,0.5,0.5\n3,0.75,\n4,1,\n"));
  }

  void sampleModelUnderTester() {
    SampleTableModel model(nullptr, 600);  // a small bound: the tester rechecks every row on each change
    SampleFilterModel filter;
    filter.setSourceModel(&model);
    QAbstractItemModelTester t1(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester t2(&filter, QAbstractItemModelTester::FailureReportingMode::QtTest);
    std::vector<grpo::run::SampleRecord> rows;
    for (int i = 0; i < 300; ++i)
      rows.push_back({i, i / 10, i % 8, "What is " + std::to_string(i) + "?", i % 3 ? "12" : "7", "7", "stop",
                      i % 3 ? 0.0 : 1.0, i % 3 ? -0.5 : 1.0});
    for (int k = 0; k < 4; ++k) model.append(rows);  // 1200 > 600: the oldest go
    QCOMPARE(model.rowCount(), 600);
    QCOMPARE(model.index(0, SampleTableModel::Step).data().toInt(), 0);  // rows 0..299 of the 3rd batch
    filter.setRewardedOnly(true);
    QCOMPARE(filter.rowCount(), 600 / 3);
    filter.setSearch("What is 297?");
    QVERIFY(filter.rowCount() > 0);
    for (int r = 0; r < filter.rowCount(); ++r)
      QVERIFY(filter.index(r, SampleTableModel::Prompt).data().toString() == "What is 297?");
    filter.setSearch("");
    filter.setRewardedOnly(false);
    filter.sort(SampleTableModel::Reward, Qt::DescendingOrder);
    QCOMPARE(filter.index(0, SampleTableModel::Reward).data().toDouble(), 1.0);
    model.clear();
    QCOMPARE(filter.rowCount(), 0);
  }

  void workerModelUnderTester() {
    WorkersPage page;
    QAbstractItemModelTester t(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(page.addUrl("http://127.0.0.1:8011").isEmpty());
    QVERIFY(page.addUrl("http://[::1]:8012/").isEmpty());
    QVERIFY(page.addUrl("http://127.0.0.1:8011").contains("already"));
    QVERIFY(page.addUrl("127.0.0.1").contains("not a worker URL"));
    QVERIFY(page.addUrl("ftp://127.0.0.1:21").contains("not a worker URL"));
    QCOMPARE(page.urls(), QStringList({"http://127.0.0.1:8011", "http://[::1]:8012"}));
    WorkerRow w = page.model()->rows()[0];
    w.status = "healthy";
    w.adapterVersion = 3;
    w.inFlight = 16;
    QVERIFY(page.model()->upsert(w));
    QCOMPARE(page.model()->index(0, WorkerTableModel::Adapter).data().toString(), QString("policy-v3"));
    QCOMPARE(page.model()->rowCount(), 2);
    QVERIFY(page.model()->remove("http://127.0.0.1:8011"));
    QCOMPARE(page.model()->rowCount(), 1);
  }

  // The live run's snapshots become rows; the buttons send commands through the sink (what
  // MainWindow connects to EngineController::workerCommand); a removed worker stays gone.
  void workerSnapshotsAndCommands() {
    WorkersPage page;
    page.show();
    QAbstractItemModelTester t(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    auto* drain = page.findChild<QPushButton*>("drainWorker");
    auto* view = page.findChild<QTableView*>("workersView");
    QVERIFY(drain && view);
    QVERIFY(page.addUrl("http://127.0.0.1:8011").isEmpty());
    view->selectRow(0);
    QVERIFY(!drain->isEnabled());  // no live router
    std::vector<std::pair<grpo::run::WorkerAction, QString>> sent;
    page.setCommandSink([&](grpo::run::WorkerAction a, const QString& url) {
      sent.emplace_back(a, url);
      return QString();
    });
    grpo::run::WorkerInfo a;
    a.name = "wa";
    a.url = "http://127.0.0.1:8011";
    a.status = "up";
    a.adapter_version = 4;
    a.inflight = 3;
    a.tok_s = 250;
    a.affinity = 0.5;
    grpo::run::WorkerInfo b = a;
    b.name = "wb";
    b.url = "http://127.0.0.1:8012";
    b.status = "out";
    b.last_error = "/health: connection refused";
    page.setWorkers({a, b});
    QCOMPARE(page.model()->rowCount(), 2);
    auto cell = [&](int row, int col) { return page.model()->index(row, col).data().toString(); };
    QCOMPARE(cell(0, WorkerTableModel::Name), QString("wa"));
    QCOMPARE(cell(0, WorkerTableModel::Status), QString("up"));
    QCOMPARE(cell(0, WorkerTableModel::Adapter), QString("policy-v4"));
    QCOMPARE(cell(0, WorkerTableModel::InFlight), QString("3"));
    QCOMPARE(cell(0, WorkerTableModel::TokS), QString("250"));
    QCOMPARE(cell(0, WorkerTableModel::Affinity), QString("50%"));
    QCOMPARE(cell(1, WorkerTableModel::LastError), QString("/health: connection refused"));
    view->selectRow(0);
    QVERIFY(drain->isEnabled());
    drain->click();
    QCOMPARE(sent.size(), size_t(1));
    QCOMPARE(sent[0].first, grpo::run::WorkerAction::Drain);
    QCOMPARE(sent[0].second, QString("http://127.0.0.1:8011"));
    QCOMPARE(cell(0, WorkerTableModel::Status), QString("draining"));
    page.findChild<QPushButton*>("pauseWorker")->click();
    page.findChild<QPushButton*>("resumeWorker")->click();
    QCOMPARE(sent.size(), size_t(3));
    QCOMPARE(sent[1].first, grpo::run::WorkerAction::Pause);
    QCOMPARE(sent[2].first, grpo::run::WorkerAction::Resume);
    view->selectRow(1);
    page.findChild<QPushButton*>("removeWorker")->click();
    QCOMPARE(sent.back().first, grpo::run::WorkerAction::Remove);
    QCOMPARE(page.model()->find("http://127.0.0.1:8012"), -1);
    page.setWorkers({a, b});  // a snapshot taken before the router applied the removal
    QCOMPARE(page.model()->find("http://127.0.0.1:8012"), -1);
    QVERIFY(page.addUrl("http://127.0.0.1:8012").isEmpty());  // added back: goes down as Add
    QCOMPARE(sent.back().first, grpo::run::WorkerAction::Add);
    page.setWorkers({a, b});
    QCOMPARE(cell(page.model()->find("http://127.0.0.1:8012"), WorkerTableModel::Status), QString("out"));
    page.setCommandSink({});
    QVERIFY(!drain->isEnabled());
  }

  // Slurm-launched workers: a queued task is a row of its own until its worker joins; the job's
  // state, reason and time left show beside the router's view; Launch and Cancel reach the run.
  void workersPageShowsSlurmJobsAndLaunches() {
    QSettings().remove("slurmLaunch");
    WorkersPage page;
    grpo::run::WorkerInfo queued;
    queued.name = "123_1";
    queued.status = "queued";
    queued.job = "123_1";
    queued.job_state = "pending";
    queued.job_reason = "Resources";
    grpo::run::WorkerInfo joined;
    joined.name = "gpu07";
    joined.url = "http://10.0.3.7:41234";
    joined.status = "up";
    joined.job = "123_0";
    joined.job_state = "running";
    joined.job_node = "gpu07";
    joined.job_time_left = "58:12";
    page.setWorkers({joined, queued});
    QCOMPARE(page.model()->rowCount(), 2);
    auto cell = [&](const QString& key, int col) { return page.model()->index(page.model()->find(key), col).data().toString(); };
    QCOMPARE(cell("job 123_1", WorkerTableModel::Scheduler), QString("pending (Resources)"));
    QCOMPARE(cell("http://10.0.3.7:41234", WorkerTableModel::Job), QString("123_0"));
    QCOMPARE(cell("http://10.0.3.7:41234", WorkerTableModel::TimeLeft), QString("58:12"));
    queued.url = "http://10.0.3.8:41000";  // task 123_1 started and joined: one row, under its URL
    queued.status = "up";
    queued.job_state = "running";
    queued.job_reason.clear();
    page.setWorkers({joined, queued});
    QCOMPARE(page.model()->rowCount(), 2);
    QCOMPARE(page.model()->find("job 123_1"), -1);
    QCOMPARE(cell("http://10.0.3.8:41000", WorkerTableModel::Scheduler), QString("running"));
    QVERIFY(page.urls().isEmpty());  // launched workers are not kept as the next run's worker_urls

    // No live run: a launch is kept for the next one, as its slurm_* keys.
    SlurmLaunchFields f;
    f.count = 3;
    f.partition = "gpu";
    f.gres = "gpu:1";
    f.timeLimit = "2:00:00";
    QVERIFY(page.launchOnSlurm(f).isEmpty());
    QVERIFY(page.pendingLaunch().has_value());
    grpo::grpo::TrainConfig cfg;
    page.pendingLaunch()->applyTo(cfg);
    QCOMPARE(cfg.slurm_workers, int64_t{3});
    QCOMPARE(cfg.slurm_partition, std::string("gpu"));
    QCOMPARE(SlurmLaunchFields::load().gres, QString("gpu:1"));  // remembered
    SlurmLaunchFields none;
    none.count = 0;
    QVERIFY(!page.launchOnSlurm(none).isEmpty());

    // A live run: the launch and the cancel go down, the whole job of the selected task.
    std::vector<std::pair<int, nlohmann::json>> launched;
    std::vector<QString> cancelled;
    page.setLaunchSinks([&](int n, const nlohmann::json& o) { launched.emplace_back(n, o); return QString(); },
                        [&](const QString& job) { cancelled.push_back(job); return QString(); });
    QVERIFY(page.launchOnSlurm(f).isEmpty());
    QCOMPARE(launched.size(), size_t(1));
    QCOMPARE(launched[0].first, 3);
    QCOMPARE(launched[0].second, (nlohmann::json{{"partition", "gpu"}, {"gres", "gpu:1"}, {"time_limit", "2:00:00"}}));
    auto* view = page.findChild<QTableView*>("workersView");
    view->selectRow(page.model()->find("http://10.0.3.8:41000"));
    auto* cancel = page.findChild<QPushButton*>("cancelSlurmJob");
    QVERIFY(cancel->isEnabled());
    cancel->click();
    QCOMPARE(cancelled, std::vector<QString>{"123"});
    QSettings().remove("slurmLaunch");
  }

  // The system's light/dark switch reaches the charts live: a dark application palette re-themes
  // the chart background, title and axes.
  void chartsFollowThePalette() {
    const QPalette light = QApplication::palette();
    MetricChart c("Reward", {LineSpec{"reward", "mean", "", "", false}});
    c.show();
    auto* x = qobject_cast<QValueAxis*>(c.chart()->axes(Qt::Horizontal).value(0));
    QVERIFY(x);
    QCOMPARE(c.chart()->backgroundBrush().color(), c.palette().color(QPalette::Base));
    QPalette dark;
    dark.setColor(QPalette::Window, QColor(0x2b, 0x2b, 0x2b));
    dark.setColor(QPalette::Base, QColor(0x1e, 0x1e, 0x1e));
    dark.setColor(QPalette::WindowText, QColor(0xee, 0xee, 0xee));
    dark.setColor(QPalette::Text, QColor(0xee, 0xee, 0xee));
    dark.setColor(QPalette::Mid, QColor(0x55, 0x55, 0x55));
    QVERIFY(light.color(QPalette::Base) != dark.color(QPalette::Base));
    QApplication::setPalette(dark);
    QCoreApplication::processEvents();
    QCOMPARE(c.chart()->backgroundBrush().color(), QColor(0x1e, 0x1e, 0x1e));
    QCOMPARE(c.chart()->titleBrush().color(), QColor(0xee, 0xee, 0xee));
    QCOMPARE(x->labelsColor(), QColor(0xee, 0xee, 0xee));
    QApplication::setPalette(light);
    QCoreApplication::processEvents();
    QCOMPARE(c.chart()->backgroundBrush().color(), light.color(QPalette::Base));
    QCOMPARE(x->labelsColor(), light.color(QPalette::WindowText));
  }

  // Faults (events with "advice") and their ends become list rows and chart markers.
  void faultEventsInListAndMarkers() {
    DashboardPage d;
    d.show();
    d.store().add(1, "reward", 0.1);
    d.store().add(5, "reward", 0.2);
    auto ev = [](const nlohmann::json& j) {
      return grpo::run::EngineEvent{j.value("event", ""), 0.0, j.value("step", int64_t{0}), j};
    };
    d.addEvents({ev({{"event", "pause"}, {"step", 1}}),
                 ev({{"event", "worker_quarantined"}, {"step", 2}, {"severity", "warning"},
                     {"message", "worker http://10.0.0.5:8000 answered garbage 3 times"},
                     {"advice", "Check that worker's logs; it is retried in 60 s."}}),
                 ev({{"event", "worker_quarantined_cleared"}, {"step", 4}, {"message", "back"}}),
                 ev({{"event", "start"}, {"step", 0}})});
    QCOMPARE(d.eventsList()->count(), 4);
    // The markers are the events the catalogue marks (core/records/catalogue.h: the browser view
    // applies the same rule to the same served table): the pause, the fault (it carries advice)
    // and its end; not the start. Their labels and severities are the catalogue's.
    const auto& marks = d.store().markers();
    QCOMPARE(marks.size(), size_t(3));
    QCOMPARE(marks[0].kind, QString("pause"));
    QCOMPARE(marks[0].label, QString::fromStdString(grpo::run::find_event_kind("pause")->label));
    QCOMPARE(marks[1].severity, QString("warning"));
    QCOMPARE(marks[2].severity, QString("cleared"));
    QCOMPARE(marks[2].step, 4.0);
    QCOMPARE(d.eventsList()->item(1)->data(Qt::UserRole + 1).toString(), QString("warning"));
    QVERIFY(d.eventsList()->item(1)->text().contains("Check that worker's logs"));
    QVERIFY(d.eventsList()->item(1)->text().contains("answered garbage"));
    d.redrawNow(true);
    // The Dashboard's charts are the catalogue's (the browser view's too), in its order, and the
    // derived trained tok/s reaches the throughput chart.
    const auto& catalogue = grpo::run::chart_catalogue();
    QCOMPARE(d.charts().size(), catalogue.size());
    for (size_t i = 0; i < catalogue.size(); ++i) {
      QCOMPARE(d.chartIds()[i], catalogue[i].id);
      QCOMPARE(d.charts()[i]->title(), QString::fromStdString(catalogue[i].title));
      QCOMPARE(d.chartById(catalogue[i].id), d.charts()[i]);
    }
    QVERIFY(d.chartById("no-such-chart") == nullptr);
    QCOMPARE(grpo::run::derived_metrics(std::map<std::string, double>{{"batch/trained_tokens_per_step", 300}, {"perf/step_s", 2}}),
             (std::map<std::string, double>{{"trained_tok_s", 150}}));
    QVERIFY(grpo::run::derived_metrics(std::map<std::string, double>{{"batch/trained_tokens_per_step", 300}, {"perf/step_s", 0}}).empty());
    // One reader for a metrics record: the record's own fields are not metrics, non-numbers are skipped.
    grpo::run::MetricsRecord rec;
    QVERIFY(!grpo::run::read_metrics_record(nlohmann::json{{"step", 1.5}, {"loss", 1}}, &rec));
    QVERIFY(!grpo::run::read_metrics_record(nlohmann::json::array({1, 2}), &rec));
    QVERIFY(grpo::run::read_metrics_record(
        nlohmann::json{{"step", 7}, {"time", 3.5}, {"policy_version", 3}, {"verdict", "balanced"}, {"loss", 0.25}, {"note", "x"}}, &rec));
    QCOMPARE(rec.step, int64_t(7));
    QCOMPARE(rec.time, 3.5);
    QCOMPARE(rec.policy_version, int64_t(3));
    QCOMPARE(rec.verdict, std::string("balanced"));
    QCOMPARE(rec.metrics, (std::map<std::string, double>{{"loss", 0.25}}));
    QVERIFY(grpo::run::read_metrics_record(nlohmann::json{{"step", 8}, {"wall_time", 9.0}}, &rec));
    QCOMPARE(rec.time, 9.0);  // TRL's name for it
    QVERIFY(rec.metrics.empty());
    MetricChart* reward = d.chart("Reward");
    QCOMPARE(reward->markerCount(), 3);  // pause, the fault, its end (start is no marker)
    QCOMPARE(d.store().markers()[1].severity, QString("warning"));
    QVERIFY(d.store().markers()[1].text.contains("Check that worker's logs"));
    QCOMPARE(d.store().markers()[2].severity, QString("cleared"));
    for (int i = 0; i < DashboardPage::kMaxEvents + 10; ++i) d.addEvents({ev({{"event", "warning"}, {"step", 5}})});
    QCOMPARE(d.eventsList()->count(), DashboardPage::kMaxEvents);  // bounded
  }

  void workersFoundBySignedBeacons() {
#ifdef GRPO_UI_WITH_CLUSTER_TEST
    QTemporaryDir dir;
    const QString token = dir.filePath("cluster-token");
    WorkersPage page;
    QAbstractItemModelTester t(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(page.startDiscovery("127.0.0.1:0", token).isEmpty());
    QVERIFY(page.discoveryPort() > 0);
    const std::string key = grpo::cluster::beacon_key(grpo::cluster::load_or_create_token(token.toStdString()));
    grpo::cluster::BeaconSender sender(key, {"127.0.0.1", page.discoveryPort()}, [] {
      grpo::cluster::Beacon b;
      b.name = "gpu-box";
      b.url = "http://127.0.0.1:18123";
      b.devices = "cpu x2";
      b.load = 3;
      return b;
    }, 0.2);
    // An unsigned sender (wrong key) is refused and never listed.
    grpo::cluster::BeaconSender rogue("not-the-key", {"127.0.0.1", page.discoveryPort()}, [] {
      grpo::cluster::Beacon b;
      b.name = "rogue";
      b.url = "http://127.0.0.1:18999";
      return b;
    }, 0.2);
    sender.start();
    rogue.start();
    QTRY_COMPARE_WITH_TIMEOUT(page.model()->find("http://127.0.0.1:18123") >= 0, true, 20000);
    const auto& row = page.model()->rows()[page.model()->find("http://127.0.0.1:18123")];
    QCOMPARE(row.name, QString("gpu-box"));
    QCOMPARE(row.inFlight, 3);
    QTest::qWait(600);
    QCOMPARE(page.model()->find("http://127.0.0.1:18999"), -1);
    sender.stop();
    rogue.stop();
    page.stopDiscovery();
    QVERIFY(!page.discovering());
#else
    QSKIP("core/cluster is not built");
#endif
  }

  // A Hub dataset (a folder laid out like one: README.md configs, Parquet data files) picked on
  // the setup page: the preview shows its first rows with the columns renamed, and the config
  // carries dataset_name/config/split/columns.
  void setupPagePreviewsAHubDataset() {
    QTemporaryDir repo;
    const QString parquet = QString(GRPO_TEST_DATA) + "/parquet/gsm8k_like.parquet";
    QVERIFY(QDir(repo.path()).mkpath("main"));
    QVERIFY(QFile::copy(parquet, repo.filePath("main/train-00000-of-00001.parquet")));
    QFile readme(repo.filePath("README.md"));
    QVERIFY(readme.open(QIODevice::WriteOnly));
    readme.write("---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: main/train-*\n---\n");
    readme.close();

    SetupPage page;
    page.loadPreset("demo");
    json j = page.configJson();
    j["task"] = "";
    j["dataset_name"] = repo.path().toStdString();
    j["dataset_config"] = "main";
    j["dataset_columns"] = {{"question", "prompt"}};
    page.setConfigJson(j);
    auto* status = page.findChild<QLabel*>("datasetStatus");
    QCOMPARE(page.datasetPreview()->rowCount(), 5);
    QVERIFY2(page.datasetPreview()->item(0, 1)->text().startsWith("Natalia sold clips"), qPrintable(status->text()));
    QVERIFY(page.datasetPreview()->item(0, 2)->text().endsWith("#### 26"));
    QVERIFY2(status->text().contains("1 data file"), qPrintable(status->text()));
    const json out = page.configJson();
    QCOMPARE(out["dataset_name"], json(repo.path().toStdString()));
    QCOMPARE(out["dataset_config"], json("main"));
    QCOMPARE(out["dataset_columns"], json({{"question", "prompt"}}));
    QCOMPARE(out["train_file"], json(""));
    grpo::grpo::TrainConfig cfg;
    QString err;
    QVERIFY2(page.buildConfig(cfg, &err), qPrintable(err));
    QCOMPARE(cfg.dataset_name, repo.path().toStdString());

    // A wrong split is shown in place, naming the splits that exist.
    page.findChild<QLineEdit*>("datasetSplit")->setText("validation");
    Q_EMIT page.findChild<QLineEdit*>("datasetSplit")->editingFinished();
    QCOMPARE(page.datasetPreview()->rowCount(), 0);
    QVERIFY2(status->text().contains("splits found: \"train\""), qPrintable(status->text()));
  }

  void setupPageValidatesInPlace() {
    SetupPage page;
    page.loadPreset("demo");
    QVERIFY2(page.modelValid(), qPrintable(page.modelStatus()));
    QVERIFY(page.modelStatus().contains("qwen2", Qt::CaseInsensitive));  // the inspect summary
    QCOMPARE(page.datasetPreview()->rowCount(), 5);                       // generated arithmetic
    QVERIFY(page.datasetPreview()->item(0, 1)->text().startsWith("What is"));

    QTemporaryDir bad;
    page.setModelFolder(bad.path());
    QVERIFY(!page.modelValid());
    QVERIFY2(page.modelStatus().contains("config.json"), qPrintable(page.modelStatus()));
    auto* status = page.findChild<QLabel*>("modelStatus");
    QVERIFY(status && status->isVisibleTo(&page) && !status->text().isEmpty());

    page.field("temperature")->setText("-1");
    QVERIFY2(page.fieldError("temperature").contains("temperature"), qPrintable(page.fieldError("temperature")));
    QVERIFY(!page.findChild<QLabel*>("fieldError:temperature")->isHidden());
    page.field("temperature")->setText("0.7");
    QVERIFY(page.fieldError("temperature").isEmpty());
    page.field("loss_type")->setText("ppo");
    QVERIFY(page.fieldError("loss_type").contains("dapo"));  // names what is allowed
    page.field("loss_type")->setText("dapo");

    grpo::grpo::TrainConfig cfg;
    QString err;
    QVERIFY(!page.buildConfig(cfg, &err));  // the bad model folder blocks Start
    QVERIFY(err.contains("model"));
    page.loadPreset("demo");
    QVERIFY2(page.buildConfig(cfg, &err), qPrintable(err));
    QCOMPARE(cfg.task, std::string("arith"));
    QCOMPARE(cfg.num_generations, int64_t(8));

    // Save and load round trip through a real file.
    QTemporaryDir dir;
    const QString path = dir.filePath("run.json");
    page.field("learning_rate")->setText("0.002");
    QVERIFY(page.saveConfigFile(path, &err));
    SetupPage other;
    QVERIFY2(other.loadConfigFile(path, &err), qPrintable(err));
    QCOMPARE(other.field("learning_rate")->text(), QString("0.002"));
    QVERIFY(other.buildConfig(cfg, &err));
    QCOMPARE(cfg.learning_rate, 0.002);
    // A config file with an unknown key is refused with the nearest known key.
    QFile f(dir.filePath("bad.json"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("{\"learning_rat\": 0.1}");
    f.close();
    QVERIFY(!other.loadConfigFile(dir.filePath("bad.json"), &err));
    QVERIFY2(err.contains("learning_rate"), qPrintable(err));
  }

  void retuneDialogShowsRefusalInPlace() {
    nlohmann::json current = {{"learning_rate", 0.001}, {"temperature", 1.0}};
    nlohmann::json sent;
    RetuneDialog dlg(current, [&](const nlohmann::json& c) {
      sent = c;
      return c.contains("temperature") ? QString("retune: key \"temperature\": value -2 is not valid") : QString();
    });
    QVERIFY(dlg.field("learning_rate"));
    QVERIFY(!dlg.field("r"));  // not retunable
    QVERIFY(!dlg.apply());     // nothing changed
    dlg.field("temperature")->setText("-2");
    QVERIFY(!dlg.apply());
    QVERIFY(dlg.errorText().contains("temperature"));
    QVERIFY(!dlg.field("temperature")->styleSheet().isEmpty());
    dlg.field("temperature")->setText("1.0");
    dlg.field("learning_rate")->setText("0.003");
    QVERIFY(dlg.apply());
    QCOMPARE(sent, nlohmann::json({{"learning_rate", 0.003}}));
  }
};

QTEST_MAIN(TestUiModels)
#include "test_ui_models.moc"
