#include "ui/workers_page.h"

#include <QCheckBox>
#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QUrl>
#include <QTimer>
#include <QVBoxLayout>

#include "core/api/cluster.h"
#include "core/api/run_folder.h"

namespace grpo::ui {

int WorkerTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int WorkerTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant WorkerTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& w = rows_[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case Name: return w.name;
      case Url: return w.url;
      case Status: return w.status;
      case Adapter: return w.adapterVersion < 0 ? QVariant(QStringLiteral("—")) : QVariant(QString::fromStdString(::grpo::run::RunFolder::adapter_name(w.adapterVersion)));
      case InFlight: return w.inFlight;
      case TokS: return QString::number(w.tokPerSec, 'f', 0);
      case Affinity: return QString::number(w.affinity * 100, 'f', 0) + "%";
      case LastError: return w.lastError;
    }
  }
  if (role == Qt::ToolTipRole && index.column() == LastError) return w.lastError;
  return {};
}

QVariant WorkerTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  static const char* names[] = {"name", "URL", "status", "adapter", "in flight", "tok/s", "affinity", "last error"};
  return section >= 0 && section < ColumnCount ? QVariant(tr(names[section])) : QVariant();
}

int WorkerTableModel::find(const QString& url) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].url == url) return static_cast<int>(i);
  return -1;
}

bool WorkerTableModel::upsert(const WorkerRow& row) {
  const int i = find(row.url);
  if (i >= 0) {
    rows_[static_cast<size_t>(i)] = row;
    Q_EMIT dataChanged(index(i, 0), index(i, ColumnCount - 1));
    return true;
  }
  if (static_cast<int>(rows_.size()) >= kMaxWorkers) return false;
  const int n = static_cast<int>(rows_.size());
  beginInsertRows({}, n, n);
  rows_.push_back(row);
  endInsertRows();
  return true;
}

bool WorkerTableModel::remove(const QString& url) {
  const int i = find(url);
  if (i < 0) return false;
  beginRemoveRows({}, i, i);
  rows_.erase(rows_.begin() + i);
  endRemoveRows();
  return true;
}

struct WorkersPage::Discovery {
  std::unique_ptr<cluster::WorkerDirectory> directory;
  QStringList known;  // URLs this page added from beacons
};

WorkersPage::WorkersPage(QWidget* parent) : QWidget(parent) {
  model_ = new WorkerTableModel(this);
  auto* lay = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  url_ = new QLineEdit;
  url_->setObjectName("workerUrl");
  url_->setPlaceholderText(tr("http://host:port of a `grpo worker` or a vLLM server"));
  auto* add = new QPushButton(tr("Add worker"));
  remove_ = new QPushButton(tr("Remove"));
  remove_->setObjectName("removeWorker");
  drain_ = new QPushButton(tr("Drain"));
  drain_->setObjectName("drainWorker");
  drain_->setToolTip(tr("Send it no new requests; those in flight finish (then it is safe to stop)"));
  pause_ = new QPushButton(tr("Pause"));
  pause_->setObjectName("pauseWorker");
  pause_->setToolTip(tr("Send it no new requests and pause it (POST /pause?mode=wait) until Resume"));
  resume_ = new QPushButton(tr("Resume"));
  resume_->setObjectName("resumeWorker");
  resume_->setToolTip(tr("Undo Drain or Pause: back in rotation"));
  bar->addWidget(url_, 1);
  bar->addWidget(add);
  bar->addWidget(remove_);
  bar->addWidget(drain_);
  bar->addWidget(pause_);
  bar->addWidget(resume_);
  lay->addLayout(bar);
  auto* disc = new QHBoxLayout;
  listen_ = new QCheckBox(tr("Listen for worker beacons on"));
  listen_->setObjectName("listenBeacons");
  address_ = new QLineEdit("239.255.77.42:29517");
  address_->setObjectName("discoveryAddress");
  address_->setToolTip(tr("UDP group:port (discovery_address); beacons must be signed with this machine's cluster token"));
  disc->addWidget(listen_);
  disc->addWidget(address_);
  disc->addStretch(1);
  lay->addLayout(disc);
  poll_ = new QTimer(this);
  poll_->setInterval(1000);
  connect(poll_, &QTimer::timeout, this, &WorkersPage::refreshDiscovered);
  connect(listen_, &QCheckBox::toggled, this, [this](bool on) {
    if (!on) {
      stopDiscovery();
      return;
    }
    const QString err = startDiscovery(address_->text());
    status_->setText(err);
    if (!err.isEmpty()) {
      const QSignalBlocker block(listen_);
      listen_->setChecked(false);
    }
  });
  status_ = new QLabel;
  status_->setObjectName("workerStatus");
  status_->setStyleSheet("color: #c62828;");
  lay->addWidget(status_);
  view_ = new QTableView;
  view_->setObjectName("workersView");
  view_->setModel(model_);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->horizontalHeader()->setSectionResizeMode(WorkerTableModel::LastError, QHeaderView::Stretch);
  view_->verticalHeader()->hide();
  lay->addWidget(view_, 1);
  auto* note = new QLabel(tr("Workers on this network announce themselves (signed beacons) when discovery is on; "
                             "others are added by URL and used by the next run."));
  note->setWordWrap(true);
  lay->addWidget(note);
  connect(add, &QPushButton::clicked, this, [this] {
    const QString err = addUrl(url_->text());
    status_->setText(err);
    if (err.isEmpty()) url_->clear();
  });
  connect(url_, &QLineEdit::returnPressed, add, &QPushButton::click);
  const std::pair<QPushButton*, run::WorkerAction> actions[] = {
      {remove_, run::WorkerAction::Remove}, {drain_, run::WorkerAction::Drain},
      {pause_, run::WorkerAction::Pause}, {resume_, run::WorkerAction::Resume}};
  for (const auto& [button, action] : actions)
    connect(button, &QPushButton::clicked, this, [this, action = action] {
      const QString url = selectedUrl();
      if (!url.isEmpty()) status_->setText(command(action, url));
    });
  connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &WorkersPage::updateButtons);
  updateButtons();
}

QString WorkersPage::selectedUrl() const {
  const auto sel = view_->selectionModel()->selectedRows();
  return sel.isEmpty() ? QString() : model_->rows()[static_cast<size_t>(sel.front().row())].url;
}

void WorkersPage::updateButtons() {
  const bool selected = !selectedUrl().isEmpty();
  remove_->setEnabled(selected);
  const QString needs_router = tr("Needs a live run with remote workers (the cluster router)");
  for (auto* b : {drain_, pause_, resume_}) {
    b->setEnabled(selected && sink_ != nullptr);
    if (!sink_) b->setStatusTip(needs_router);
  }
}

void WorkersPage::setCommandSink(CommandSink sink) {
  sink_ = std::move(sink);
  removed_.clear();
  updateButtons();
}

QString WorkersPage::command(run::WorkerAction action, const QString& url) {
  using run::WorkerAction;
  if (action == WorkerAction::Remove) {
    model_->remove(url);
    Q_EMIT workersChanged();
    if (!sink_) return {};
    removed_ << url;
    const QString err = sink_(action, url);
    return err.isEmpty() ? QString() : tr("%1 leaves the list; the live run said: %2").arg(url, err);
  }
  if (action == WorkerAction::Add) {
    removed_.removeAll(url);
    if (!sink_) return {};
    const QString err = sink_(action, url);
    return err.isEmpty() ? QString() : tr("%1 is used by the next run (the live run said: %2)").arg(url, err);
  }
  if (!sink_) return tr("Drain, pause and resume act on a live run with remote workers");
  const int i = model_->find(url);
  if (i < 0) return tr("%1 is not in the list").arg(url);
  const QString err = sink_(action, url);
  if (!err.isEmpty()) return err;
  WorkerRow row = model_->rows()[static_cast<size_t>(i)];  // shown at once; the next snapshot confirms
  row.status = action == WorkerAction::Drain ? tr("draining") : action == WorkerAction::Pause ? tr("paused") : tr("up");
  model_->upsert(row);
  return {};
}

void WorkersPage::setWorkers(const QVector<run::WorkerInfo>& workers) {
  for (const auto& w : workers) {
    const QString url = QString::fromStdString(w.url);
    if (removed_.contains(url)) continue;
    WorkerRow row;
    row.name = QString::fromStdString(w.name);
    row.url = url;
    row.status = QString::fromStdString(w.status);
    row.adapterVersion = w.adapter_version;
    row.inFlight = static_cast<int>(w.inflight);
    row.tokPerSec = w.tok_s;
    row.affinity = w.affinity;
    row.lastError = QString::fromStdString(w.last_error);
    const int i = model_->find(url);
    if (i >= 0 && model_->rows()[static_cast<size_t>(i)] == row) continue;  // no needless dataChanged
    if (model_->upsert(row) && i < 0) Q_EMIT workersChanged();
  }
  updateButtons();
}

QString WorkersPage::addUrl(const QString& text) {
  const QUrl url(text.trimmed());
  if (!url.isValid() || (url.scheme() != "http" && url.scheme() != "https") || url.host().isEmpty() || url.port() <= 0)
    return tr("\"%1\" is not a worker URL: expected http(s)://host:port").arg(text.trimmed());
  const QString norm = url.scheme() + "://" + url.authority();
  if (model_->find(norm) >= 0) return tr("%1 is already in the list").arg(norm);
  WorkerRow row;
  row.name = url.host() + ":" + QString::number(url.port());
  row.url = norm;
  row.status = sink_ ? tr("joining") : tr("added");
  if (!model_->upsert(row)) return tr("the worker table is full (%1)").arg(WorkerTableModel::kMaxWorkers);
  Q_EMIT workersChanged();
  return command(run::WorkerAction::Add, norm);
}

QString WorkersPage::startDiscovery(const QString& address, const QString& tokenFile) {
  try {
    const std::string path = tokenFile.isEmpty() ? cluster::default_token_path() : tokenFile.toStdString();
    const std::string key = cluster::beacon_key(cluster::load_or_create_token(path));
    auto d = std::make_shared<Discovery>();
    d->directory = std::make_unique<cluster::WorkerDirectory>(
        key, cluster::parse_host_port(address.toStdString(), "discovery address"));
    connect(d->directory.get(), &cluster::WorkerDirectory::workerJoined, this, [this] { refreshDiscovered(); });
    connect(d->directory.get(), &cluster::WorkerDirectory::workerLeft, this, [this] { refreshDiscovered(); });
    discovery_ = d;
    poll_->start();
    return {};
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
}

void WorkersPage::stopDiscovery() {
  poll_->stop();
  if (!discovery_) return;
  for (const auto& url : discovery_->known) {
    const int i = model_->find(url);
    if (i < 0) continue;
    WorkerRow row = model_->rows()[static_cast<size_t>(i)];
    row.status = tr("not listening");
    model_->upsert(row);
  }
  discovery_.reset();
}

bool WorkersPage::discovering() const { return discovery_ != nullptr; }

quint16 WorkersPage::discoveryPort() const {
  if (discovery_ && discovery_->directory) return discovery_->directory->port();
  return 0;
}

// Rows from the directory's verified beacons: new workers appear, silent ones are marked gone.
void WorkersPage::refreshDiscovered() {
  if (!discovery_ || !discovery_->directory) return;
  QStringList seen;
  for (const auto& w : discovery_->directory->workers()) {
    const QString url = QString::fromStdString(w.beacon.url);
    seen << url;
    const int i = model_->find(url);
    WorkerRow row = i >= 0 ? model_->rows()[static_cast<size_t>(i)] : WorkerRow{};
    row.url = url;
    row.name = QString::fromStdString(w.beacon.name);
    row.status = tr("discovered (%1)").arg(QString::fromStdString(w.beacon.devices));
    row.inFlight = static_cast<int>(w.beacon.load);
    if (model_->upsert(row) && !discovery_->known.contains(url)) {
      discovery_->known << url;
      Q_EMIT workersChanged();
    }
  }
  for (const auto& url : discovery_->known) {
    const int i = model_->find(url);
    if (i < 0 || seen.contains(url)) continue;
    WorkerRow row = model_->rows()[static_cast<size_t>(i)];
    row.status = tr("silent");
    model_->upsert(row);
  }
  if (discovery_->directory->rejected() > 0)
    status_->setText(tr("%1 beacons refused (last: %2)")
                         .arg(discovery_->directory->rejected())
                         .arg(QString::fromStdString(discovery_->directory->last_rejection())));
}

QStringList WorkersPage::urls() const {
  QStringList out;
  for (const auto& r : model_->rows()) out << r.url;
  return out;
}

}  // namespace grpo::ui
