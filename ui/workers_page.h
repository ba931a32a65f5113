// Workers page: the rollout workers of the run (name, URL, status, adapter version, requests in
// flight, tok/s, prefix affinity, last error) in a table model over plain WorkerRow values, fed by
// the live run's router snapshots (setWorkers, through EngineController: never the router itself),
// discovery, or a test. Workers added by URL here become the run's worker_urls at Start; while a
// run with remote workers is live, Add, Remove, Drain, Pause and Resume go down to its router
// through the command sink.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <QAbstractTableModel>
#include <QString>
#include <QWidget>

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
  bool operator==(const WorkerRow&) const = default;
};

class WorkerTableModel : public QAbstractTableModel {
  Q_OBJECT
public:
  enum Column { Name, Url, Status, Adapter, InFlight, TokS, Affinity, LastError, ColumnCount };
  static constexpr int kMaxWorkers = 1024;

  using QAbstractTableModel::QAbstractTableModel;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  // Inserts or updates the row with the same URL; false when the table is full.
  bool upsert(const WorkerRow& row);
  bool remove(const QString& url);
  const std::vector<WorkerRow>& rows() const { return rows_; }
  int find(const QString& url) const;

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

Q_SIGNALS:
  void workersChanged();

private:
  WorkerTableModel* model_;
  QTableView* view_;
  QLineEdit* url_;
  QPushButton *remove_, *drain_, *pause_, *resume_;
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
