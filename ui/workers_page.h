// Workers page: the rollout workers of the run (name, URL, status, adapter version, requests in
// flight, tok/s, prefix affinity, last error) in a table model over plain WorkerRow values, so
// discovery, the router or a test can feed it. Workers added by URL here become the run's
// worker_urls at Start.
#pragma once

#include <memory>
#include <vector>

#include <QAbstractTableModel>
#include <QString>
#include <QWidget>

class QCheckBox;
class QLabel;
class QTimer;
class QLineEdit;
class QTableView;
class QPushButton;

namespace grpo::ui {

struct WorkerRow {
  QString name, url, status;  // status: added, healthy, busy, draining, paused, down
  qint64 adapterVersion = -1;  // -1: none loaded
  int inFlight = 0;
  double tokPerSec = 0;
  double affinity = 0;         // fraction of requests routed here by prefix affinity
  QString lastError;
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

Q_SIGNALS:
  void workersChanged();

private:
  WorkerTableModel* model_;
  QTableView* view_;
  QLineEdit* url_;
  QPushButton *remove_, *drain_, *pause_;
  QLabel* status_;
  QCheckBox* listen_;
  QLineEdit* address_;
  QTimer* poll_;
  struct Discovery;
  std::shared_ptr<Discovery> discovery_;
  void refreshDiscovered();
};

}  // namespace grpo::ui
