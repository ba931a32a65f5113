#include "ui/main_window.h"

#include <cmath>

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QDesktopServices>
#include <QGuiApplication>
#include <QPushButton>
#include <QTimer>
#include <QUrl>
#include <QCloseEvent>
#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QInputDialog>
#include <QPointer>
#include <QProgressBar>
#include <QProgressDialog>
#include <QThread>
#include <QSettings>
#include <QStatusBar>
#include <QStyle>
#include <QTabWidget>
#include <QToolBar>

#include "ui/adapters_page.h"
#include "ui/dashboard_page.h"
#include "ui/retune_dialog.h"
#include "ui/run_history.h"
#include "ui/runs_page.h"
#include "ui/samples_page.h"
#include "ui/setup_page.h"
#include "ui/workers_page.h"

#include "core/api/charts.h"
#include "core/api/cluster.h"
#include "core/api/run_folder.h"
#include "core/api/util.h"

namespace grpo::ui {

QString format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "—";
  const int total = static_cast<int>(s + 0.5);
  if (total >= 3600) return QString("%1h%2m").arg(total / 3600).arg((total / 60) % 60, 2, 10, QChar('0'));
  return QString("%1m%2s").arg(total / 60).arg(total % 60, 2, 10, QChar('0'));
}

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("GRPO Studio"));
  controller_ = new EngineController(this);
  remote_ = new RemoteRunClient(this);
  tabs_ = new QTabWidget;
  tabs_->setObjectName("pages");
  tabs_->setDocumentMode(true);
  setup_ = new SetupPage;
  dashboard_ = new DashboardPage;
  samples_ = new SamplesPage;
  adapters_ = new AdaptersPage;
  runs_ = new RunsPage;
  workers_ = new WorkersPage;
  tabs_->addTab(setup_, tr("Run setup"));
  tabs_->addTab(dashboard_, tr("Dashboard"));
  tabs_->addTab(samples_, tr("Samples"));
  tabs_->addTab(adapters_, tr("Adapters"));
  tabs_->addTab(runs_, tr("Runs"));
  tabs_->addTab(workers_, tr("Workers"));
  setCentralWidget(tabs_);

  stateLabel_ = new QLabel(tr("ready"));
  stepLabel_ = new QLabel;
  versionLabel_ = new QLabel;
  etaLabel_ = new QLabel;
  progress_ = new QProgressBar;
  progress_->setObjectName("progress");
  progress_->setMaximumWidth(220);
  progress_->setRange(0, 1);
  progress_->setValue(0);
  statusBar()->addPermanentWidget(stateLabel_);
  statusBar()->addPermanentWidget(stepLabel_);
  statusBar()->addPermanentWidget(versionLabel_);
  statusBar()->addPermanentWidget(etaLabel_);
  statusBar()->addPermanentWidget(progress_);
  servingLabel_ = new QLabel;
  servingLabel_->setObjectName("servingLink");
  servingLabel_->setTextFormat(Qt::RichText);
  servingLabel_->setOpenExternalLinks(true);  // opens the browser view, token in the fragment
  servingLabel_->hide();
  statusBar()->addPermanentWidget(servingLabel_);
  buildActions();

  connect(controller_, &EngineController::stepsReady, this, &MainWindow::onSteps);
  connect(controller_, &EngineController::eventsReady, this, &MainWindow::onEvents);
  connect(controller_, &EngineController::stateChanged, this, [this](run::EngineState s) {
    stateLabel_->setText(run::to_string(s));
    updateActions();
  });
  connect(controller_, &EngineController::finished, this, &MainWindow::onFinished);
  connect(controller_, &EngineController::servingChanged, this, &MainWindow::onServingChanged);
  // The Workers page shows the live router's snapshots; its commands go down while the run lives.
  connect(controller_, &EngineController::workersReady, workers_, &WorkersPage::setWorkers);
  connect(controller_, &EngineController::started, this, [this] {
    workers_->setCommandSink([this](run::WorkerAction a, const QString& url) { return controller_->workerCommand(a, url); });
    workers_->setLaunchSinks([this](int n, const nlohmann::json& o) { return controller_->launchWorkers(n, o); },
                             [this](const QString& job) { return controller_->cancelWorkers(job); });
  });
  connect(controller_, &EngineController::workersLaunched, this, [this](const QString& job, const QString& error) {
    statusBar()->showMessage(!error.isEmpty() ? tr("Slurm: %1").arg(error)
                             : job.isEmpty()  ? tr("Slurm job cancelled")
                                              : tr("Slurm job %1 submitted: its workers join the run").arg(job),
                             10000);
  });
  connect(remote_, &RemoteRunClient::stepsReady, this, &MainWindow::onSteps);
  connect(remote_, &RemoteRunClient::eventsReady, this, &MainWindow::onEvents);
  connect(remote_, &RemoteRunClient::stateChanged, this, [this](run::EngineState s) {
    stateLabel_->setText(remote_->pausePending() ? tr("pausing at the end of the step (remote)")
                                                 : tr("%1 (remote)").arg(run::to_string(s)));
    if (s == run::EngineState::Finished || s == run::EngineState::Failed) {
      statusBar()->showMessage(tr("Remote run %1 ended (%2)").arg(remote_->runDir(), run::to_string(s)), 15000);
      etaLabel_->setText(tr("ETA —"));
    }
    updateActions();
  });
  connect(remote_, &RemoteRunClient::errorChanged, this, [this](const QString& e) {
    if (!e.isEmpty()) dashboard_->setVerdict(tr("remote endpoint error"), e);
    if (!e.isEmpty()) statusBar()->showMessage(e, 10000);
    updateActions();
  });
  connect(remote_, &RemoteRunClient::retuneDone, this, [this](const QString& e) {
    statusBar()->showMessage(e.isEmpty() ? tr("Remote retune accepted") : tr("Remote retune refused: %1").arg(e), 10000);
  });
  connect(runs_, &RunsPage::attachRequested, this, &MainWindow::openAttachDialog);
  connect(runs_, &RunsPage::openRequested, this, [this](const QString& d) { openRun(d); });
  connect(runs_, &RunsPage::overlaysChanged, this, [this] {
    for (auto* c : dashboard_->charts()) c->setOverlays(runs_->overlays());
  });

  setup_->loadPreset("demo");  // opens ready to run the demo
  QSettings settings;
  if (!restoreGeometry(settings.value("window/geometry").toByteArray())) resize(1500, 950);
  restoreState(settings.value("window/state").toByteArray());
  if (settings.contains("window/page")) tabs_->setCurrentIndex(settings.value("window/page").toInt());
  updateActions();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildActions() {
  auto* tb = addToolBar(tr("Run"));
  tb->setObjectName("runToolbar");
  tb->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
  auto make = [&](const QString& text, QStyle::StandardPixmap icon, const QKeySequence& keys, const QString& tip) {
    auto* a = new QAction(style()->standardIcon(icon), text, this);
    a->setShortcut(keys);
    a->setToolTip(QString("%1 (%2)").arg(tip, keys.toString(QKeySequence::NativeText)));
    return a;
  };
  start_ = make(tr("Start"), QStyle::SP_MediaPlay, QKeySequence(Qt::CTRL | Qt::Key_R), tr("Start a run with the setup page's config"));
  pause_ = make(tr("Pause"), QStyle::SP_MediaPause, QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_P), tr("Pause at the next step boundary"));
  resume_ = make(tr("Resume"), QStyle::SP_MediaSeekForward, QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R), tr("Resume the paused run"));
  stop_ = make(tr("Stop"), QStyle::SP_MediaStop, QKeySequence(Qt::CTRL | Qt::Key_Period), tr("Stop: final checkpoint and adapter"));
  retune_ = make(tr("Retune..."), QStyle::SP_FileDialogDetailedView, QKeySequence(Qt::CTRL | Qt::Key_T), tr("Change hyperparameters of the live run"));
  export_ = make(tr("Export..."), QStyle::SP_DialogSaveButton, QKeySequence(Qt::CTRL | Qt::Key_E), tr("Export an adapter version or checkpoint"));
  open_ = make(tr("Open run..."), QStyle::SP_DirOpenIcon, QKeySequence::Open, tr("Show a past run's charts"));
  serve_ = new QAction(tr("Serve in browser..."), this);
  serve_->setObjectName("serveAction");
  serve_->setToolTip(tr("Serve this run's dashboard and controls to any browser, as `grpo train --serve` does"));
  attach_ = new QAction(tr("Attach to run..."), this);
  attach_->setToolTip(tr("Follow and control a headless `grpo train --serve HOST:PORT` through its HTTP endpoint"));
  detach_ = new QAction(tr("Detach"), this);
  detach_->setToolTip(tr("Stop following the remote run (it keeps running)"));
  for (auto* a : {start_, pause_, resume_, stop_}) tb->addAction(a);
  tb->addSeparator();
  tb->addAction(retune_);
  tb->addAction(export_);
  tb->addAction(open_);

  connect(start_, &QAction::triggered, this, [this] { startRun(); });
  // While attached, the run controls act on the remote run through its POST routes.
  connect(pause_, &QAction::triggered, this, [this] { remote_->attached() ? remote_->pause() : controller_->pause(); });
  connect(resume_, &QAction::triggered, this, [this] { remote_->attached() ? remote_->resume() : controller_->resume(); });
  connect(stop_, &QAction::triggered, this, [this] { remote_->attached() ? remote_->stop() : controller_->stop(); });
  connect(attach_, &QAction::triggered, this, &MainWindow::openAttachDialog);
  connect(serve_, &QAction::triggered, this, &MainWindow::openServeDialog);
  connect(detach_, &QAction::triggered, this, &MainWindow::detachRun);
  connect(retune_, &QAction::triggered, this, &MainWindow::openRetune);
  connect(export_, &QAction::triggered, this, [this] { showPage(adapters_); });
  connect(open_, &QAction::triggered, this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Run folder"));
    if (!d.isEmpty()) openRun(d);
  });

  auto* file = menuBar()->addMenu(tr("&File"));
  file->addAction(open_);
  file->addAction(attach_);
  file->addAction(detach_);
  file->addAction(tr("Save charts as PNG..."), this, &MainWindow::saveChartsPng);
  file->addAction(tr("Save metrics as CSV..."), this, &MainWindow::saveMetricsCsv);
  file->addAction(tr("Download from the Hub..."), this, [this] { downloadFromHub(); });
  file->addSeparator();
  auto* quit = file->addAction(tr("Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);
  auto* run = menuBar()->addMenu(tr("&Run"));
  for (auto* a : {start_, pause_, resume_, stop_, retune_, export_}) run->addAction(a);
  run->addSeparator();
  run->addAction(serve_);
  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("About GRPO Studio"), this, [this] {
    QMessageBox::about(this, tr("About GRPO Studio"),
                       tr("GRPO Studio %1\nAsynchronous GRPO with LoRA for Hugging Face models.")
                           .arg(QApplication::applicationVersion()));
  });
}

void MainWindow::updateActions() {
  const bool remote = remote_->attached();
  const bool active = remote ? remote_->state() == run::EngineState::Running || remote_->state() == run::EngineState::Paused
                             : controller_->active();
  const auto s = remote ? remote_->state() : controller_->state();
  start_->setEnabled(!active && !remote);
  attach_->setEnabled(!controller_->active());
  detach_->setEnabled(remote);
  const bool pending = remote && remote_->pausePending();  // Resume cancels a pause not yet reached
  pause_->setEnabled(active && s == run::EngineState::Running && !pending);
  resume_->setEnabled(active && (s == run::EngineState::Paused || pending));
  stop_->setEnabled(active);
  retune_->setEnabled(active && (s == run::EngineState::Running || s == run::EngineState::Paused));
  serve_->setEnabled(!remote && controller_->active());
  serve_->setText(controller_->servingLink().isEmpty() ? tr("Serve in browser...") : tr("Browser view..."));
}

bool MainWindow::serveInBrowser(const QString& hostPort, QString* error) {
  const QString e = controller_->serve(hostPort);
  if (error) *error = e;
  if (!e.isEmpty()) {
    statusBar()->showMessage(tr("Cannot serve the browser view: %1").arg(e), 15000);
    return false;
  }
  QSettings().setValue("serve/address", hostPort.trimmed());
  statusBar()->showMessage(tr("Serving the browser view on %1...").arg(hostPort.trimmed()), 5000);
  return true;
}

// Run > Serve in browser...: asks for the address, then shows the link (also in the status bar);
// while serving, shows the link again with Stop serving.
void MainWindow::openServeDialog() {
  if (controller_->servingLink().isEmpty()) {
    bool ok = false;
    const QString address = QInputDialog::getText(
        this, tr("Serve in browser"),
        tr("Address to serve this run's browser view on (HOST:PORT).\n127.0.0.1 keeps it on this machine; "
           "0.0.0.0 lets other machines in (with the link's token). Port 0 picks a free port."),
        QLineEdit::Normal, QSettings().value("serve/address", "127.0.0.1:8765").toString(), &ok);
    if (!ok) return;
    showServeDialog_ = true;
    QString error;
    if (!serveInBrowser(address, &error)) {
      showServeDialog_ = false;
      QMessageBox::warning(this, tr("Serve in browser"), error);
    }
    return;
  }
  showServingLink();
}

void MainWindow::showServingLink() {
  const QString link = controller_->servingLink();
  if (link.isEmpty()) return;
  QDialog d(this);
  d.setWindowTitle(tr("Browser view"));
  auto* layout = new QFormLayout(&d);
  auto* edit = new QLineEdit(link);
  edit->setReadOnly(true);
  edit->setMinimumWidth(520);
  layout->addRow(new QLabel(tr("Open this link in any browser that can reach this machine. It carries the "
                               "cluster token: share it only with people who may control the run.")));
  layout->addRow(tr("Link"), edit);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  auto* copy = buttons->addButton(tr("Copy link"), QDialogButtonBox::ActionRole);
  auto* open = buttons->addButton(tr("Open in browser"), QDialogButtonBox::ActionRole);
  auto* stop = buttons->addButton(tr("Stop serving"), QDialogButtonBox::DestructiveRole);
  connect(copy, &QPushButton::clicked, &d, [link] { QGuiApplication::clipboard()->setText(link); });
  connect(open, &QPushButton::clicked, &d, [link] { QDesktopServices::openUrl(QUrl(link)); });
  connect(stop, &QPushButton::clicked, &d, [this, &d] {
    controller_->stopServing();
    d.accept();
  });
  connect(buttons, &QDialogButtonBox::rejected, &d, &QDialog::reject);
  layout->addRow(buttons);
  d.exec();
}

void MainWindow::onServingChanged(const QString& link, const QString& error) {
  if (!link.isEmpty()) {
    const QString base = link.left(link.indexOf('#'));
    servingLabel_->setText(QString("<a href=\"%1\">%2</a>").arg(link.toHtmlEscaped(), tr("browser view")));
    servingLabel_->setToolTip(tr("Serving this run on %1 (click to open it in the browser)").arg(base));
    servingLabel_->show();
    statusBar()->showMessage(tr("Serving the browser view on %1").arg(base), 10000);
    if (showServeDialog_) {
      showServeDialog_ = false;
      QTimer::singleShot(0, this, [this] { showServingLink(); });
    }
  } else {
    servingLabel_->hide();
    servingLabel_->clear();
    if (!error.isEmpty()) {
      statusBar()->showMessage(tr("Cannot serve the browser view: %1").arg(error), 15000);
      if (showServeDialog_) QMessageBox::warning(this, tr("Serve in browser"), error);
    } else {
      statusBar()->showMessage(tr("Stopped serving the browser view"), 5000);
    }
    showServeDialog_ = false;
  }
  updateActions();
}

void MainWindow::showPage(QWidget* page) { tabs_->setCurrentWidget(page); }

bool MainWindow::startRun() {
  if (remote_->attached()) {
    statusBar()->showMessage(tr("Attached to a remote run: detach first (File > Detach)"), 10000);
    return false;
  }
  ::grpo::grpo::TrainConfig cfg;
  QString err;
  if (!setup_->buildConfig(cfg, &err)) {
    showPage(setup_);
    statusBar()->showMessage(tr("Cannot start: %1").arg(err), 10000);
    return false;
  }
  for (const auto& url : workers_->urls())
    if (std::find(cfg.worker_urls.begin(), cfg.worker_urls.end(), url.toStdString()) == cfg.worker_urls.end())
      cfg.worker_urls.push_back(url.toStdString());
  // "Launch on Slurm..." before a run: this run asks for them, and serves itself so they can join.
  if (const auto& launch = workers_->pendingLaunch()) {
    launch->applyTo(cfg);
    if (cfg.serve.empty()) cfg.serve = "0.0.0.0:0";
  }
  QString dir = setup_->runDirectory();
  if (dir.isEmpty())
    dir = QDir::home().filePath("grpo-studio-runs/run-" + QDateTime::currentDateTime().toString("yyyyMMdd-hhmmss"));
  dashboard_->clear();
  samples_->model()->clear();
  if (!controller_->start(cfg, dir)) {
    statusBar()->showMessage(tr("Cannot start: %1").arg(controller_->lastError()), 10000);
    showPage(setup_);
    return false;
  }
  liveConfig_ = cfg.to_json();
  (void)workers_->takePendingLaunch();  // asked for by this run
  shownRun_ = dir;
  dashboard_->setTitle(tr("Run %1 — loading the model...").arg(dir));
  const double G = static_cast<double>(std::max<int64_t>(1, cfg.num_generations));
  dashboard_->setQueueBound(std::ceil(static_cast<double>(cfg.queue_maxsize) / G));
  progress_->setRange(0, static_cast<int>(cfg.max_steps));
  progress_->setValue(0);
  stepLabel_->setText(tr("step 0/%1").arg(cfg.max_steps));
  versionLabel_->setText(QString::fromStdString(::grpo::run::RunFolder::adapter_name(0)));
  etaLabel_->setText(tr("ETA —"));
  adapters_->setRunDir(dir);
  showPage(dashboard_);
  updateActions();
  return true;
}

void MainWindow::onSteps(const QVector<::grpo::run::StepReport>& reports) {
  dashboard_->addReports(reports);
  samples_->addReports(reports);
  const auto& r = reports.back();
  stepLabel_->setText(tr("step %1/%2").arg(r.step).arg(r.max_steps));
  const QString version = QString::fromStdString(::grpo::run::RunFolder::adapter_name(r.policy_version));
  if (versionLabel_->text() != version) adapters_->refresh();  // a new version was published
  versionLabel_->setText(version);
  const double eta = r.step > 0 ? r.elapsed_s / static_cast<double>(r.step) * static_cast<double>(r.max_steps - r.step) : NAN;
  etaLabel_->setText(tr("ETA %1").arg(format_duration(eta)));
  progress_->setRange(0, static_cast<int>(r.max_steps));
  progress_->setValue(static_cast<int>(r.step));
  auto reward = r.metrics.find("reward");
  const QString shown = remote_->attached() ? remote_->url().toString() + " " + remote_->runDir() : controller_->runDir();
  dashboard_->setTitle(tr("Run %1 — step %2, reward %3")
                           .arg(shown)
                           .arg(r.step)
                           .arg(reward == r.metrics.end() ? QString("—") : QString::number(reward->second, 'f', 3)));
  updateActions();
}

void MainWindow::onEvents(const QVector<::grpo::run::EngineEvent>& events) {
  dashboard_->addEvents(events);
  for (const auto& e : events) {
    if (e.kind == "retune" && e.data.contains("new") && e.data["new"].is_object())
      for (const auto& [k, v] : e.data["new"].items()) liveConfig_[k] = v;
    if (is_fault(e.data))  // the shared fault convention: what happened, and what to do about it
      statusBar()->showMessage(describe_event(e.data) + " — " + event_advice(e.data), 20000);
    else if (::grpo::run::event_is_marker(e.data) || ::grpo::run::event_severity(e.data) != "info")  // the catalogue's
      statusBar()->showMessage(describe_event(e.data), 8000);
  }
  updateActions();
}

void MainWindow::onFinished(const QString& adapter, const QString& error) {
  workers_->setCommandSink({});
  workers_->setLaunchSinks({}, {});
  updateActions();
  adapters_->refresh();
  if (!error.isEmpty()) {
    dashboard_->setTitle(tr("Run %1 failed").arg(controller_->runDir()));
    dashboard_->setVerdict(tr("failed"), error);
    statusBar()->showMessage(tr("Run failed: %1").arg(error));
  } else {
    statusBar()->showMessage(tr("Run finished; final adapter %1").arg(adapter), 15000);
    runs_->addRun(controller_->runDir());
  }
  etaLabel_->setText(tr("ETA —"));
  Q_EMIT runFinished(adapter, error);
}

bool MainWindow::openRun(const QString& runDir) {
  if (controller_->active() || remote_->attached()) {
    statusBar()->showMessage(tr("A run is active: the dashboard shows it. Check the past run on the Runs page to overlay it."), 10000);
    return false;
  }
  RunHistory h;
  try {
    h = load_run_history(runDir.toStdString(), dashboard_->store());
  } catch (const std::exception& e) {
    statusBar()->showMessage(QString::fromStdString(e.what()), 15000);
    return false;
  }
  shownRun_ = runDir;
  runs_->addRun(runDir);
  dashboard_->setTitle(tr("Run %1 (%2, %3 steps)").arg(runDir, QString::fromStdString(h.state)).arg(h.steps));
  dashboard_->setVerdict(QString::fromStdString(h.last_verdict), QString());
  // config.json as recorded (maybe another tool's or hand-edited): typed lookups that never throw.
  const int64_t G = std::max<int64_t>(1, json_integer(h.config, "num_generations", 1));
  dashboard_->setQueueBound(std::ceil(static_cast<double>(std::max<int64_t>(0, json_integer(h.config, "queue_maxsize"))) /
                                      static_cast<double>(G)));
  samples_->loadRun(runDir);
  adapters_->setRunDir(runDir);
  const int64_t max_steps = std::clamp<int64_t>(json_integer(h.config, "max_steps"), 0, INT32_MAX);
  progress_->setRange(0, static_cast<int>(std::max<int64_t>(1, max_steps)));
  progress_->setValue(static_cast<int>(h.steps));
  stepLabel_->setText(tr("step %1/%2").arg(h.steps).arg(max_steps));
  showPage(dashboard_);
  dashboard_->redrawNow(true);
  return true;
}

bool MainWindow::attachRun(const QString& url, const QString& tokenFile, QString* error) {
  auto refuse = [&](const QString& e) {
    if (error) *error = e;
    statusBar()->showMessage(tr("Cannot attach: %1").arg(e), 15000);
    return false;
  };
  if (controller_->active()) return refuse(tr("a local run is active: stop it first"));
  QByteArray token;
  try {
    token = QByteArray::fromStdString(cluster::read_token_file(tokenFile.toStdString()));
  } catch (const std::exception& e) {
    return refuse(QString::fromStdString(e.what()));
  }
  QString err;
  dashboard_->clear();
  if (!remote_->attach(QUrl(url.trimmed()), token, &err)) return refuse(err);
  samples_->model()->clear();
  liveConfig_ = ::grpo::grpo::TrainConfig{}.to_json();
  shownRun_.clear();
  dashboard_->setTitle(tr("Remote run %1 — connecting...").arg(remote_->url().toString()));
  stepLabel_->setText(tr("step 0/—"));
  versionLabel_->setText(QString::fromStdString(::grpo::run::RunFolder::adapter_name(0)));
  etaLabel_->setText(tr("ETA —"));
  stateLabel_->setText(tr("attaching"));
  showPage(dashboard_);
  updateActions();
  return true;
}

void MainWindow::detachRun() {
  if (!remote_->attached()) return;
  remote_->detach();
  stateLabel_->setText(tr("ready"));
  etaLabel_->setText(tr("ETA —"));
  statusBar()->showMessage(tr("Detached; the remote run goes on by itself"), 8000);
  updateActions();
}

void MainWindow::openAttachDialog() {
  QDialog dlg(this);
  dlg.setWindowTitle(tr("Attach to run"));
  auto* form = new QFormLayout(&dlg);
  QSettings settings;
  auto* url = new QLineEdit(settings.value("attach/url", "http://127.0.0.1:8470").toString());
  url->setObjectName("attachUrl");
  QString token_default;
  token_default = QString::fromStdString(cluster::default_token_path());
  auto* token = new QLineEdit(settings.value("attach/tokenFile", token_default).toString());
  token->setObjectName("attachTokenFile");
  auto* err = new QLabel;
  err->setObjectName("attachError");
  err->setStyleSheet("color: #c62828;");
  err->setWordWrap(true);
  form->addRow(tr("Endpoint URL"), url);
  form->addRow(tr("Cluster token file"), token);
  form->addRow(err);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::rejected, &dlg, &QDialog::reject);
  connect(buttons, &QDialogButtonBox::accepted, &dlg, [&] {
    QString e;
    if (!attachRun(url->text(), token->text(), &e)) {
      err->setText(e);  // in place; the dialog stays open
      return;
    }
    settings.setValue("attach/url", url->text());
    settings.setValue("attach/tokenFile", token->text());
    dlg.accept();
  });
  dlg.exec();
}

QString MainWindow::statusSummary() const {
  return stepLabel_->text() + " · " + versionLabel_->text() + " · " + etaLabel_->text();
}

void MainWindow::openRetune() {
  if (remote_->attached()) {
    // The remote answers asynchronously: the dialog closes on sending, the verdict goes to the status bar.
    RetuneDialog dlg(liveConfig_, [this](const nlohmann::json& c) {
      for (const auto& [k, v] : c.items()) liveConfig_[k] = v;
      remote_->retune(c);
      return QString();
    }, this);
    dlg.exec();
    return;
  }
  if (!controller_->active()) return;
  RetuneDialog dlg(liveConfig_, [this](const nlohmann::json& c) { return controller_->retune(c); }, this);
  dlg.exec();
}

void MainWindow::saveChartsPng() {
  const QString d = QFileDialog::getExistingDirectory(this, tr("Folder for the chart images"));
  if (d.isEmpty()) return;
  QStringList written;
  dashboard_->saveAllPng(d, &written);
  statusBar()->showMessage(tr("Saved %1 charts to %2").arg(written.size()).arg(d), 8000);
}

void MainWindow::saveMetricsCsv() {
  const QString p = QFileDialog::getSaveFileName(this, tr("Save metrics"), "metrics.csv", tr("CSV files (*.csv)"));
  if (p.isEmpty()) return;
  QFile f(p);
  const std::string csv = dashboard_->store().to_csv(dashboard_->store().keys());
  if (f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(csv.data(), static_cast<qint64>(csv.size())) >= 0)
    statusBar()->showMessage(tr("Saved %1").arg(p), 8000);
  else
    statusBar()->showMessage(tr("%1: %2").arg(p, f.errorString()), 15000);
}

void MainWindow::closeEvent(QCloseEvent* e) {
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  settings.setValue("window/page", tabs_->currentIndex());
  remote_->detach();  // a remote run goes on by itself
  controller_->stop();  // the controller's destructor waits for the final checkpoint
  QMainWindow::closeEvent(e);
}

// File > Download from the Hub...: `grpo download` on a worker thread (its own network event loop),
// progress in a dialog; the repo id then fills the model field (it resolves from the cache).
void MainWindow::downloadFromHub() {
  bool ok = false;
  const QString repo = QInputDialog::getText(this, tr("Download from the Hub"),
                                             tr("Repo id (org/name), downloaded into the Hugging Face cache:"),
                                             QLineEdit::Normal, QString(), &ok)
                           .trimmed();
  if (!ok || repo.isEmpty()) return;
  QPointer<QProgressDialog> dlg = new QProgressDialog(tr("Downloading %1...").arg(repo), tr("Hide"), 0, 1000, this);
  dlg->setAttribute(Qt::WA_DeleteOnClose);
  dlg->setMinimumDuration(0);
  dlg->setValue(0);
  QPointer<MainWindow> self(this);
  auto* worker = QThread::create([repo, dlg, self] {
    std::string error;
    try {
      hub::DownloadOptions o;
      o.repo_id = repo.toStdString();
      o.on_progress = [dlg](const hub::DownloadProgress& p) {
        const int v = p.bytes_total ? static_cast<int>(1000.0 * double(p.bytes_done) / double(p.bytes_total)) : 0;
        const QString text = QString("%1/%2 files, %3 / %4")
                                 .arg(p.files_done).arg(p.files_total)
                                 .arg(QString::fromStdString(format_bytes(double(p.bytes_done))))
                                 .arg(QString::fromStdString(format_bytes(double(p.bytes_total))));
        QMetaObject::invokeMethod(qApp, [dlg, v, text] {
          if (dlg) dlg->setValue(std::min(v, 999)), dlg->setLabelText(text);
        }, Qt::QueuedConnection);
      };
      hub::download_snapshot(o);
    } catch (const std::exception& e) {
      error = e.what();
    }
    QMetaObject::invokeMethod(qApp, [repo, dlg, self, error] {
      if (dlg) dlg->close();
      if (!self) return;
      if (!error.empty()) {
        QMessageBox::warning(self, tr("Download from the Hub"), QString::fromStdString(error));
        return;
      }
      self->setupPage()->setModelFolder(repo);
      self->statusBar()->showMessage(tr("Downloaded %1 into the Hugging Face cache").arg(repo), 10000);
    }, Qt::QueuedConnection);
  });
  connect(worker, &QThread::finished, worker, &QObject::deleteLater);
  worker->start();
}

}  // namespace grpo::ui
