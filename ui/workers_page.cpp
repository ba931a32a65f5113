#include "ui/workers_page.h"

#include <algorithm>

#include <QCheckBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QSettings>
#include <QSpinBox>
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

bool askSlurmLaunch(QWidget* parent, SlurmLaunchFields& f, bool live);  // the dialog, below

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
      case Job: return w.job;
      case Scheduler: return w.jobState;
      case TimeLeft: return w.timeLeft;
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
  static const char* names[] = {"name", "URL", "status", "job", "scheduler", "time left", "adapter",
                                "in flight", "tok/s", "affinity", "last error"};
  return section >= 0 && section < ColumnCount ? QVariant(tr(names[section])) : QVariant();
}

int WorkerTableModel::find(const QString& key) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].key() == key) return static_cast<int>(i);
  return -1;
}

bool WorkerTableModel::upsert(const WorkerRow& row) {
  const int i = find(row.key());
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

bool WorkerTableModel::remove(const QString& key) {
  const int i = find(key);
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
  auto* slurm = new QHBoxLayout;
  launch_ = new QPushButton(tr("Launch on Slurm..."));
  launch_->setObjectName("launchSlurm");
  launch_->setToolTip(tr("Ask Slurm for rollout workers (one job array); they join the run over its endpoint"));
  cancel_ = new QPushButton(tr("Cancel job"));
  cancel_->setObjectName("cancelSlurmJob");
  cancel_->setToolTip(tr("scancel the selected worker's job: its workers leave the run and are not replaced"));
  slurm->addWidget(launch_);
  slurm->addWidget(cancel_);
  slurm->addStretch(1);
  lay->addLayout(slurm);
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
  connect(launch_, &QPushButton::clicked, this, [this] {
    SlurmLaunchFields f = SlurmLaunchFields::load();
    if (!askSlurmLaunch(this, f, launch_sink_ != nullptr)) return;
    const QString err = launchOnSlurm(f);
    status_->setText(err);
  });
  connect(cancel_, &QPushButton::clicked, this, [this] { status_->setText(cancelJob(selectedJob())); });
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
  cancel_->setEnabled(!selectedJob().isEmpty() && cancel_sink_ != nullptr);
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
    row.job = QString::fromStdString(w.job);
    row.jobState = QString::fromStdString(w.job_state) +
                   (w.job_reason.empty() ? QString() : " (" + QString::fromStdString(w.job_reason) + ")");
    row.node = QString::fromStdString(w.job_node);
    row.timeLeft = QString::fromStdString(w.job_time_left);
    if (!url.isEmpty() && !row.job.isEmpty() && model_->remove(QStringLiteral("job ") + row.job))  // it joined
      Q_EMIT workersChanged();
    const int i = model_->find(row.key());
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
  for (const auto& r : model_->rows())
    if (r.job.isEmpty() && !r.url.isEmpty()) out << r.url;  // a launched worker is the scheduler's, not a URL to keep
  return out;
}

QString WorkersPage::selectedJob() const {
  const auto sel = view_->selectionModel()->selectedRows();
  return sel.isEmpty() ? QString() : model_->rows()[static_cast<size_t>(sel.front().row())].job;
}

void WorkersPage::setLaunchSinks(LaunchSink launch, CancelSink cancel) {
  launch_sink_ = std::move(launch);
  cancel_sink_ = std::move(cancel);
  updateButtons();
}

QString WorkersPage::launchOnSlurm(const SlurmLaunchFields& fields) {
  if (fields.count < 1 || fields.count > 1000) return tr("Ask for 1 to 1000 workers");
  fields.save();
  if (!launch_sink_) {  // no live run: the next run asks for them at Start
    pending_ = fields;
    return {};
  }
  return launch_sink_(fields.count, fields.overrides());
}

QString WorkersPage::cancelJob(const QString& job) {
  if (job.isEmpty()) return tr("Select a worker launched through Slurm");
  if (!cancel_sink_) return tr("Cancel acts on a live run's jobs");
  return cancel_sink_(job.section('_', 0, 0));  // the whole job of task 123_4
}

nlohmann::json SlurmLaunchFields::overrides() const {
  nlohmann::json j = nlohmann::json::object();
  const std::pair<const char*, const QString*> strings[] = {{"partition", &partition}, {"gres", &gres}, {"mem", &mem},
                                                            {"time_limit", &timeLimit}, {"account", &account}, {"qos", &qos}};
  for (const auto& [key, value] : strings)
    if (!value->isEmpty()) j[key] = value->toStdString();
  if (cpusPerTask > 0) j["cpus_per_task"] = cpusPerTask;
  return j;
}

void SlurmLaunchFields::applyTo(::grpo::grpo::TrainConfig& cfg) const {
  cfg.slurm_workers = count;
  cfg.slurm_partition = partition.toStdString();
  cfg.slurm_gres = gres.toStdString();
  cfg.slurm_mem = mem.toStdString();
  cfg.slurm_time_limit = timeLimit.toStdString();
  cfg.slurm_account = account.toStdString();
  cfg.slurm_qos = qos.toStdString();
  cfg.slurm_cpus_per_task = cpusPerTask;
}

SlurmLaunchFields SlurmLaunchFields::load() {
  QSettings st;
  st.beginGroup("slurmLaunch");
  SlurmLaunchFields f;
  f.count = std::clamp(st.value("count", f.count).toInt(), 1, 1000);
  f.partition = st.value("partition").toString();
  f.gres = st.value("gres").toString();
  f.mem = st.value("mem").toString();
  f.timeLimit = st.value("timeLimit").toString();
  f.account = st.value("account").toString();
  f.qos = st.value("qos").toString();
  f.cpusPerTask = std::clamp(st.value("cpusPerTask", 0).toInt(), 0, 1024);
  return f;
}

void SlurmLaunchFields::save() const {
  QSettings st;
  st.beginGroup("slurmLaunch");
  st.setValue("count", count);
  st.setValue("partition", partition);
  st.setValue("gres", gres);
  st.setValue("mem", mem);
  st.setValue("timeLimit", timeLimit);
  st.setValue("account", account);
  st.setValue("qos", qos);
  st.setValue("cpusPerTask", cpusPerTask);
}

// The "Launch on Slurm..." dialog: the remembered fields, edited; false when cancelled.
bool askSlurmLaunch(QWidget* parent, SlurmLaunchFields& f, bool live) {
  QDialog d(parent);
  d.setObjectName("slurmLaunchDialog");
  d.setWindowTitle(QObject::tr("Launch workers on Slurm"));
  auto* form = new QFormLayout(&d);
  auto* count = new QSpinBox;
  count->setRange(1, 1000);
  count->setValue(f.count);
  auto* cpus = new QSpinBox;
  cpus->setRange(0, 1024);
  cpus->setSpecialValueText(QObject::tr("partition default"));
  cpus->setValue(f.cpusPerTask);
  auto line = [](const QString& v, const QString& hint) {
    auto* e = new QLineEdit(v);
    e->setPlaceholderText(hint);
    return e;
  };
  auto* partition = line(f.partition, QObject::tr("the cluster's default"));
  auto* gres = line(f.gres, QObject::tr("e.g. gpu:1"));
  auto* mem = line(f.mem, QObject::tr("e.g. 16G"));
  auto* time = line(f.timeLimit, QObject::tr("minutes, or D-HH:MM:SS"));
  auto* account = line(f.account, {});
  auto* qos = line(f.qos, {});
  form->addRow(QObject::tr("Workers"), count);
  form->addRow(QObject::tr("Partition"), partition);
  form->addRow(QObject::tr("GRES"), gres);
  form->addRow(QObject::tr("CPUs per worker"), cpus);
  form->addRow(QObject::tr("Memory"), mem);
  form->addRow(QObject::tr("Time limit"), time);
  form->addRow(QObject::tr("Account"), account);
  form->addRow(QObject::tr("QoS"), qos);
  auto* note = new QLabel(live ? QObject::tr("The run submits one job array now; the workers join it over its endpoint.")
                               : QObject::tr("No run is live: the next run asks Slurm for these workers at Start "
                                             "(its slurm_* keys) and serves itself so they can join."));
  note->setWordWrap(true);
  form->addRow(note);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  QObject::connect(buttons, &QDialogButtonBox::accepted, &d, &QDialog::accept);
  QObject::connect(buttons, &QDialogButtonBox::rejected, &d, &QDialog::reject);
  form->addRow(buttons);
  if (d.exec() != QDialog::Accepted) return false;
  f.count = count->value();
  f.cpusPerTask = cpus->value();
  f.partition = partition->text().trimmed();
  f.gres = gres->text().trimmed();
  f.mem = mem->text().trimmed();
  f.timeLimit = time->text().trimmed();
  f.account = account->text().trimmed();
  f.qos = qos->text().trimmed();
  return true;
}

}  // namespace grpo::ui
