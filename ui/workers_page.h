// Workers page: the rollout workers of the run (name, URL, status, adapter version, requests in
// flight, tok/s, prefix affinity, last error) in a table model over plain WorkerRow values, fed by
// the live run's router snapshots (setWorkers, through EngineController: never the router itself),
// discovery, or a test. Workers added by URL here become the run's worker_urls at Start; while a
// run with remote workers is live, Add, Remove, Drain, Pause and Resume go down to its router
// through the command sink. Workers launched through Slurm show their task beside the router's
// view (job, scheduler state and reason, node, time left); "Launch on Slurm..." asks the live run
// for more (or sets the next run's slurm_* keys), "Cancel job" ends one job.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <QAbstractTableModel>
#include <QString>
#include <QWidget>

#include <nlohmann/json.hpp>

#include "core/api/session.h"

class QCheckBox;
class QLabel;
class QTimer;
class QLineEdit;
class QTableView;
class QPushButton;

namespace grpo::ui {

struct WorkerRow {
  QString name, url, status;  // added (not in a run yet), joining, up, out, draining, paused, discovered, silent
  qint64 adapterVersion = -1;  // -1: none loaded
  int inFlight = 0;
  double tokPerSec = 0;
  double affinity = 0;         // fraction of requests routed here by prefix affinity
  QString lastError;
  // A worker launched through Slurm: its task ("123_4"), the scheduler's state (with the reason
  // it waits), node and time left. A task that has not joined yet is a row with no URL.
  QString job, jobState, node, timeLeft;
  bool operator==(const WorkerRow&) const = default;
  // The row's identity in the table: its URL, or "job <task>" while it has none.
  QString key() const { return url.isEmpty() ? QStringLiteral("job ") + job : url; }
};

// What "Launch on Slurm..." asks for (remembered between sessions): N workers and the launch
// fields a run's slurm_* keys hold.
struct SlurmLaunchFields {
  int count = 2;
  QString partition, gres, mem, timeLimit, account, qos;
  int cpusPerTask = 0;
  // The fields that differ from the run's launch, as POST /grpo/workers/launch and
  // Engine::launch_workers take them (count aside).
  nlohmann::json overrides() const;
  // The run config keys for a run that has not started yet (slurm_workers and the rest).
  void applyTo(::grpo::grpo::TrainConfig& cfg) const;
  static SlurmLaunchFields load();  // QSettings
  void save() const;
};

class WorkerTableModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column { Name, Url, Status, Job, Scheduler, TimeLeft, Adapter, InFlight, TokS, Affinity, LastError, ColumnCount };
  static constexpr int kMaxWorkers = 1024;

  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  // Inserts or updates the row with the same key (WorkerRow::key); false when the table is full.
  bool upsert(const WorkerRow& row);
  bool remove(const QString& key);
  const std::vector<WorkerRow>& rows() const { return rows_; }
  int find(const QString& key) const;

private:
  std::vector<WorkerRow> rows_;
};

class WorkersPage : public QWidget {
  Q_OBJECT
public:
  explicit WorkersPage(QWidget* parent = nullptr);
  WorkerTableModel* model() const { return model_; }
  // Adds a worker by URL; "" or the reason it was refused (shown in place).
  QString addUrl(const QString& url);
  QStringList urls() const;
  // Listens for signed worker beacons on `address` ("group:port" or "host:port") with the
  // cluster token's key; discovered workers appear as rows. "" or the reason it failed.
  QString startDiscovery(const QString& address, const QString& tokenFile = {});
  void stopDiscovery();
  bool discovering() const;
  quint16 discoveryPort() const;  // the bound UDP port (0 when not listening)

  // Where operator commands go while a run is live: returns "" when queued, else the reason.
  // Empty function: no live router (Add/Remove edit the list for the next run; Drain, Pause and
  // Resume are disabled).
  using CommandSink = std::function<QString(run::WorkerAction, const QString& url)>;
  void setCommandSink(CommandSink sink);
  // The live router's snapshot: rows are updated or added (a worker the operator removed stays
  // gone); rows it does not list are left as they are.
  void setWorkers(const QVector<run::WorkerInfo>& workers);
  // Sends `action` for the worker at `url` (what the buttons do); "" or the reason, shown in place.
  QString command(run::WorkerAction action, const QString& url);
  QString selectedUrl() const;
  QString selectedJob() const;  // the selected row's Slurm task ("" when none)

  // "Launch on Slurm..." and "Cancel job" while a run is live: `launch` asks the run for N more
  // workers (returns "" when asked; the outcome arrives as events and rows), `cancel` cancels a
  // job ("123" of task "123_4"). Empty functions: no live run; a launch is then kept for the next
  // run (pendingLaunch) and Start turns it into the run's slurm_* keys.
  using LaunchSink = std::function<QString(int count, const nlohmann::json& overrides)>;
  using CancelSink = std::function<QString(const QString& job)>;
  void setLaunchSinks(LaunchSink launch, CancelSink cancel);
  // What the dialog asked for (count and fields), as the buttons do; "" or why not.
  QString launchOnSlurm(const SlurmLaunchFields& fields);
  QString cancelJob(const QString& job);
  const std::optional<SlurmLaunchFields>& pendingLaunch() const { return pending_; }
  std::optional<SlurmLaunchFields> takePendingLaunch() { return std::exchange(pending_, std::nullopt); }

Q_SIGNALS:
  void workersChanged();

private:
  WorkerTableModel* model_;
  QTableView* view_;
  QLineEdit* url_;
  QPushButton *remove_, *drain_, *pause_, *resume_, *launch_, *cancel_;
  LaunchSink launch_sink_;
  CancelSink cancel_sink_;
  std::optional<SlurmLaunchFields> pending_;
  CommandSink sink_;
  QStringList removed_;  // removed during the live run: ignored in snapshots that still list them
  void updateButtons();
  QLabel* status_;
  QCheckBox* listen_;
  QLineEdit* address_;
  QTimer* poll_;
  struct Discovery;
  std::shared_ptr<Discovery> discovery_;
  void refreshDiscovered();
};

}  // namespace grpo::ui
