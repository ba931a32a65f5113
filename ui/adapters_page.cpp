#include "ui/adapters_page.h"

#include <thread>

#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QPointer>
#include <QTableWidget>
#include <QVBoxLayout>

#include "core/api/export.h"
#include "core/api/run_folder.h"

namespace grpo::ui {
namespace {

enum Column { Kind, Name, Step, Modified, Path, ColumnCount };

qint64 dir_bytes(const QString& dir) {
  qint64 n = 0;
  for (const auto& f : QDir(dir).entryInfoList(QDir::Files)) n += f.size();
  return n;
}

}  // namespace

AdaptersPage::AdaptersPage(QWidget* parent) : QWidget(parent) {
  auto* lay = new QVBoxLayout(this);
  table_ = new QTableWidget(0, ColumnCount);
  table_->setObjectName("adaptersTable");
  table_->setHorizontalHeaderLabels({tr("kind"), tr("name"), tr("step / version"), tr("modified"), tr("folder")});
  table_->horizontalHeader()->setSectionResizeMode(Path, QHeaderView::Stretch);
  table_->verticalHeader()->hide();
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  lay->addWidget(table_, 1);
  auto* bar = new QHBoxLayout;
  auto* refresh = new QPushButton(tr("Refresh"));
  format_ = new QComboBox;
  format_->setObjectName("exportFormat");
  format_->addItem(tr("PEFT adapter"), false);
  format_->addItem(tr("Merged model"), true);
  dtype_ = new QComboBox;
  dtype_->setObjectName("exportDtype");
  dtype_->addItems({"f32", "bf16", "f16"});
  export_ = new QPushButton(tr("Export..."));
  export_->setObjectName("exportButton");
  bar->addWidget(refresh);
  bar->addStretch(1);
  bar->addWidget(new QLabel(tr("Format:")));
  bar->addWidget(format_);
  bar->addWidget(new QLabel(tr("dtype:")));
  bar->addWidget(dtype_);
  bar->addWidget(export_);
  lay->addLayout(bar);
  status_ = new QLabel;
  status_->setObjectName("exportStatus");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lay->addWidget(status_);
  export_->setToolTip(tr("Export the selected version or checkpoint in Hugging Face format"));
  connect(refresh, &QPushButton::clicked, this, &AdaptersPage::refresh);
  connect(export_, &QPushButton::clicked, this, &AdaptersPage::exportSelected);
}

void AdaptersPage::setRunDir(const QString& runDir) {
  runDir_ = runDir;
  refresh();
}

int AdaptersPage::rowCount() const { return table_->rowCount(); }

void AdaptersPage::refresh() {
  table_->setRowCount(0);
  if (runDir_.isEmpty()) return;
  auto add = [&](const QString& kind, const QFileInfo& fi, qint64 number) {
    const int r = table_->rowCount();
    table_->insertRow(r);
    auto* k = new QTableWidgetItem(kind);
    k->setData(Qt::UserRole, number);
    table_->setItem(r, Kind, k);
    table_->setItem(r, Name, new QTableWidgetItem(fi.fileName()));
    table_->setItem(r, Step, new QTableWidgetItem(number >= 0 ? QString::number(number) : QString("—")));
    table_->setItem(r, Modified, new QTableWidgetItem(fi.lastModified().toString("yyyy-MM-dd hh:mm:ss")));
    auto* p = new QTableWidgetItem(fi.absoluteFilePath());
    p->setToolTip(tr("%1 KiB").arg(dir_bytes(fi.absoluteFilePath()) / 1024));
    table_->setItem(r, Path, p);
  };
  // Newest first; names and numbers come from run::RunFolder, the one owner of the layout.
  const run::RunFolder run(runDir_.toStdString());
  auto versions = run.adapter_versions();
  for (auto it = versions.rbegin(); it != versions.rend(); ++it)
    add(tr("version"), QFileInfo(QString::fromStdString(run.adapter_dir(*it))), *it);
  auto steps = run.checkpoint_steps();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    add(tr("checkpoint"), QFileInfo(QString::fromStdString(run.checkpoint_dir(*it))), *it);
  if (table_->rowCount() > 0) table_->selectRow(0);
}

void AdaptersPage::exportSelected() {
  const int row = table_->currentRow();
  if (row < 0) {
    status_->setText(tr("Select a version or checkpoint first."));
    return;
  }
  const QString suggestion =
      QDir(QString::fromStdString(run::RunFolder(runDir_.toStdString()).path(run::RunFolder::kExportDir)))
          .filePath(table_->item(row, Name)->text());
  const QString out = QFileDialog::getSaveFileName(this, tr("Export to folder"), suggestion, QString(), nullptr,
                                                   QFileDialog::ShowDirsOnly);
  if (out.isEmpty()) return;
  QString err;
  if (!startExport(row, out, format_->currentData().toBool(), dtype_->currentText(), &err)) status_->setText(err);
}

bool AdaptersPage::startExport(int row, const QString& outDir, bool merged, const QString& dtype, QString* error) {
  auto refuse = [&](const QString& why) {
    if (error) *error = why;
    return false;
  };
  if (exporting_) return refuse(tr("an export is already running"));
  if (row < 0 || row >= table_->rowCount()) return refuse(tr("no such row"));
  run::ExportOptions o;
  o.run_dir = runDir_.toStdString();
  const qint64 number = table_->item(row, Kind)->data(Qt::UserRole).toLongLong();
  if (table_->item(row, Kind)->text() == tr("checkpoint")) o.checkpoint_step = number;
  else o.version = number;
  o.out_dir = outDir.toStdString();
  o.merged = merged;
  o.dtype = dtype.toStdString();
  exporting_ = true;
  export_->setEnabled(false);
  status_->setText(tr("Exporting %1 to %2 ...").arg(table_->item(row, Name)->text(), outDir));
  QPointer<AdaptersPage> self(this);
  std::thread([self, o] {
    QString out, err;
    try {
      out = QString::fromStdString(run::export_run(o).out_dir);
    } catch (const std::exception& e) {
      err = QString::fromStdString(e.what());
    }
    // Back to the GUI thread; dropped if the page is gone.
    QMetaObject::invokeMethod(QCoreApplication::instance(), [self, out, err] {
      if (!self) return;
      self->exporting_ = false;
      self->export_->setEnabled(true);
      self->status_->setStyleSheet(err.isEmpty() ? QString() : QString("color: #c62828;"));
      self->status_->setText(err.isEmpty() ? self->tr("Exported to %1").arg(out) : err);
      Q_EMIT self->exportFinished(out, err);
    }, Qt::QueuedConnection);
  }).detach();
  return true;
}

}  // namespace grpo::ui
