#include "ui/runs_page.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QSettings>
#include <QVBoxLayout>

#include "core/api/util.h"
#include "ui/run_history.h"

namespace grpo::ui {

RunsPage::RunsPage(QWidget* parent) : QWidget(parent) {
  auto* lay = new QVBoxLayout(this);
  lay->addWidget(new QLabel(tr("Past runs. Double-click to show one on the dashboard; check runs to overlay them "
                               "on the dashboard's charts.")));
  list_ = new QListWidget;
  list_->setObjectName("runsList");
  lay->addWidget(list_, 1);
  auto* bar = new QHBoxLayout;
  auto* open = new QPushButton(tr("Open run folder..."));
  auto* show = new QPushButton(tr("Show on dashboard"));
  auto* remove = new QPushButton(tr("Remove from list"));
  bar->addWidget(open);
  bar->addWidget(show);
  bar->addWidget(remove);
  auto* attach = new QPushButton(tr("Attach to run..."));
  attach->setObjectName("attachButton");
  attach->setToolTip(tr("Follow and control a headless `grpo train --serve HOST:PORT`"));
  bar->addWidget(attach);
  connect(attach, &QPushButton::clicked, this, &RunsPage::attachRequested);
  bar->addStretch(1);
  lay->addLayout(bar);
  status_ = new QLabel;
  status_->setObjectName("runsStatus");
  status_->setStyleSheet("color: #c62828;");
  status_->setWordWrap(true);
  lay->addWidget(status_);

  connect(open, &QPushButton::clicked, this, [this] {
    const QString d = QFileDialog::getExistingDirectory(this, tr("Run folder"));
    if (d.isEmpty()) return;
    QString err;
    if (addRun(d, &err)) Q_EMIT openRequested(d);
    else status_->setText(err);
  });
  connect(show, &QPushButton::clicked, this, [this] {
    if (auto* it = list_->currentItem()) Q_EMIT openRequested(it->data(Qt::UserRole).toString());
  });
  connect(list_, &QListWidget::itemDoubleClicked, this,
          [this](QListWidgetItem* it) { Q_EMIT openRequested(it->data(Qt::UserRole).toString()); });
  connect(remove, &QPushButton::clicked, this, [this] {
    auto* it = list_->currentItem();
    if (!it) return;
    stores_.erase(it->data(Qt::UserRole).toString());
    delete it;
    Q_EMIT overlaysChanged();
  });
  connect(list_, &QListWidget::itemChanged, this, [this] { Q_EMIT overlaysChanged(); });

  QSettings settings;
  for (const auto& d : settings.value("recentRuns").toStringList())
    if (QFileInfo(QDir(d).filePath("config.json")).exists()) addRun(d);
}

bool RunsPage::addRun(const QString& runDir, QString* error) {
  const QString dir = QFileInfo(runDir).absoluteFilePath();
  auto store = std::make_shared<MetricStore>();
  RunHistory h;
  try {
    h = load_run_history(dir.toStdString(), *store);
  } catch (const std::exception& e) {
    if (error) *error = QString::fromStdString(e.what());
    return false;
  }
  status_->clear();
  const bool known = stores_.count(dir) > 0;
  stores_[dir] = store;
  if (!known) {
    auto* it = new QListWidgetItem;
    it->setData(Qt::UserRole, dir);
    it->setFlags(it->flags() | Qt::ItemIsUserCheckable);
    it->setCheckState(Qt::Unchecked);
    list_->addItem(it);
  }
  for (int i = 0; i < list_->count(); ++i) {
    auto* it = list_->item(i);
    if (it->data(Qt::UserRole).toString() != dir) continue;
    const QString model = QString::fromStdString(json_string(h.config, "model_name_or_path", "?"));
    it->setText(tr("%1   (%2 steps, %3, model %4)")
                    .arg(QFileInfo(dir).fileName())
                    .arg(h.steps)
                    .arg(QString::fromStdString(h.state))
                    .arg(QFileInfo(model).fileName()));
    it->setToolTip(dir);
  }
  rememberRecent(dir);
  return true;
}

void RunsPage::rememberRecent(const QString& runDir) {
  QSettings settings;
  QStringList recent = settings.value("recentRuns").toStringList();
  recent.removeAll(runDir);
  recent.prepend(runDir);
  while (recent.size() > kMaxRecent) recent.removeLast();
  settings.setValue("recentRuns", recent);
}

QStringList RunsPage::runs() const {
  QStringList out;
  for (int i = 0; i < list_->count(); ++i) out << list_->item(i)->data(Qt::UserRole).toString();
  return out;
}

std::vector<Overlay> RunsPage::overlays() const {
  std::vector<Overlay> out;
  for (int i = 0; i < list_->count(); ++i) {
    auto* it = list_->item(i);
    if (it->checkState() != Qt::Checked) continue;
    const QString dir = it->data(Qt::UserRole).toString();
    auto s = stores_.find(dir);
    if (s != stores_.end()) out.push_back({QFileInfo(dir).fileName(), s->second});
  }
  return out;
}

void RunsPage::setChecked(const QString& runDir, bool on) {
  const QString dir = QFileInfo(runDir).absoluteFilePath();
  for (int i = 0; i < list_->count(); ++i)
    if (list_->item(i)->data(Qt::UserRole).toString() == dir) list_->item(i)->setCheckState(on ? Qt::Checked : Qt::Unchecked);
}

}  // namespace grpo::ui
