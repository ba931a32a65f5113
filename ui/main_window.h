// MainWindow: layout and wiring only (docs/ARCHITECTURE.md, "Layers"): the pages (run setup,
// dashboard, samples, adapters, runs, workers), the toolbar and menus (Start, Pause, Resume, Stop,
// Retune..., Export... with shortcuts), and the status bar (step, policy version, ETA,
// progress). Work happens in EngineController and the pages; settings persist in QSettings.
#pragma once

#include <QMainWindow>

#include "ui/engine_controller.h"
#include "ui/remote_run_client.h"

class QAction;
class QLabel;
class QProgressBar;
class QTabWidget;

namespace grpo::ui {

class AdaptersPage;
class DashboardPage;
class RunsPage;
class SamplesPage;
class SetupPage;
class WorkersPage;

class MainWindow : public QMainWindow {
  Q_OBJECT
public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Starts a run from the setup page; false (errors shown in place on the setup page) when the
  // form does not validate.
  bool startRun();
  // Shows a past run's charts, samples and adapters; false with the reason in the status bar.
  bool openRun(const QString& runDir);
  // Attaches the dashboard and the toolbar to a headless `grpo train --serve` (its URL and the
  // cluster token file); false with *error (also shown in the status bar) when it cannot start.
  bool attachRun(const QString& url, const QString& tokenFile, QString* error = nullptr);
  void detachRun();
  void openAttachDialog();
  // Serves the local run's browser view on HOST:PORT (Run > Serve in browser...); false with
  // *error (also in the status bar) when it cannot. The link then shows in the status bar.
  bool serveInBrowser(const QString& hostPort, QString* error = nullptr);
  QAction* serveAction() const { return serve_; }
  QLabel* servingLabel() const { return servingLabel_; }
  RemoteRunClient* remote() const { return remote_; }
  QAction* attachAction() const { return attach_; }
  QAction* detachAction() const { return detach_; }
  void showPage(QWidget* page);
  QString statusSummary() const;  // "step 12/300 · policy-v1 · ETA 1m02s"

  EngineController* controller() const { return controller_; }
  SetupPage* setupPage() const { return setup_; }
  DashboardPage* dashboard() const { return dashboard_; }
  SamplesPage* samplesPage() const { return samples_; }
  AdaptersPage* adaptersPage() const { return adapters_; }
  RunsPage* runsPage() const { return runs_; }
  WorkersPage* workersPage() const { return workers_; }
  QTabWidget* tabs() const { return tabs_; }
  QAction* startAction() const { return start_; }
  QAction* pauseAction() const { return pause_; }
  QAction* resumeAction() const { return resume_; }
  QAction* stopAction() const { return stop_; }
  QAction* retuneAction() const { return retune_; }
  QAction* exportAction() const { return export_; }
  QProgressBar* progressBar() const { return progress_; }

Q_SIGNALS:
  void runFinished(const QString& adapter, const QString& error);

protected:
  void closeEvent(QCloseEvent* e) override;

private:
  void buildActions();
  void updateActions();
  void onSteps(const QVector<::grpo::run::StepReport>& reports);
  void onEvents(const QVector<::grpo::run::EngineEvent>& events);
  void onFinished(const QString& adapter, const QString& error);
  void openRetune();
  void saveChartsPng();
  void saveMetricsCsv();
  void openServeDialog();
  void showServingLink();
  void onServingChanged(const QString& link, const QString& error);
  void downloadFromHub();  // File > Download from the Hub... (core/hub/hub_download.h)

  EngineController* controller_;
  RemoteRunClient* remote_;
  QAction *attach_, *detach_, *serve_;
  QLabel* servingLabel_;
  bool showServeDialog_ = false;  // the next link (or failure) answers the dialog: show it
  QTabWidget* tabs_;
  SetupPage* setup_;
  DashboardPage* dashboard_;
  SamplesPage* samples_;
  AdaptersPage* adapters_;
  RunsPage* runs_;
  WorkersPage* workers_;
  QAction *start_, *pause_, *resume_, *stop_, *retune_, *export_, *open_;
  QLabel *stepLabel_, *versionLabel_, *etaLabel_, *stateLabel_;
  QProgressBar* progress_;
  nlohmann::json liveConfig_;  // the running config with the retunes applied so far
  QString shownRun_;           // the run the dashboard shows
};

QString format_duration(double seconds);  // "3m05s", "1h02m"

}  // namespace grpo::ui
