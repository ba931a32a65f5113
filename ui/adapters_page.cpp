#include "ui/adapters_page.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QPointer>
#include <QTableWidget>
#include <QVBoxLayout>

#include "core/api/export.h"
#include "core/api/hub.h"
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
  push_ = new QPushButton(tr("Push to Hub..."));
  push_->setObjectName("pushButton");
  push_->setToolTip(tr("Export the selected version or checkpoint and upload it to a Hugging Face Hub repo "
                       "(token: HF_TOKEN or huggingface-cli login)"));
  bar->addWidget(push_);
  lay->addLayout(bar);
  status_ = new QLabel;
  status_->setObjectName("exportStatus");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  lay->addWidget(status_);
  pushStatus_ = new QLabel;
  pushStatus_->setObjectName("pushStatus");
  pushStatus_->setWordWrap(true);
  pushStatus_->setTextFormat(Qt::RichText);  // the commit link
  pushStatus_->setTextInteractionFlags(Qt::TextBrowserInteraction);
  pushStatus_->setOpenExternalLinks(true);
  lay->addWidget(pushStatus_);
  export_->setToolTip(tr("Export the selected version or checkpoint in Hugging Face format"));
  connect(refresh, &QPushButton::clicked, this, &AdaptersPage::refresh);
  connect(export_, &QPushButton::clicked, this, &AdaptersPage::exportSelected);
  connect(push_, &QPushButton::clicked, this, &AdaptersPage::pushSelected);
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

// An export or a push finished: the buttons come back, and `label` says how it went (red on failure).
void AdaptersPage::jobEnded(QLabel* label, const QString& text, bool failed) {
  exporting_ = false;
  export_->setEnabled(true);
  push_->setEnabled(true);
  label->setStyleSheet(failed ? QString("color: #c62828;") : QString());
  label->setText(text);
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
  push_->setEnabled(false);
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
      self->jobEnded(self->status_, err.isEmpty() ? self->tr("Exported to %1").arg(out) : err, !err.isEmpty());
      Q_EMIT self->exportFinished(out, err);
    }, Qt::QueuedConnection);
  }).detach();
  return true;
}

void AdaptersPage::pushSelected() {
  const int row = table_->currentRow();
  if (row < 0) {
    pushStatus_->setText(tr("Select a version or checkpoint first."));
    return;
  }
  QDialog dlg(this);
  dlg.setWindowTitle(tr("Push to Hub"));
  auto* form = new QFormLayout(&dlg);
  auto* repo = new QLineEdit;
  repo->setObjectName("pushRepoId");
  repo->setPlaceholderText(tr("org/name (created when missing)"));
  auto* branch = new QLineEdit("main");
  auto* message = new QLineEdit;
  message->setPlaceholderText(tr("Upload folder with GRPO Studio"));
  auto* priv = new QCheckBox(tr("Private (when the repo is created)"));
  auto* pr = new QCheckBox(tr("Open a pull request instead of committing to the branch"));
  form->addRow(tr("Repo id:"), repo);
  form->addRow(tr("Branch:"), branch);
  form->addRow(tr("Message:"), message);
  form->addRow(priv);
  form->addRow(pr);
  form->addRow(new QLabel(tr("Format and dtype as chosen on the page. The token is HF_TOKEN, or the one "
                             "`huggingface-cli login` saved.")));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, &dlg, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dlg, &QDialog::reject);
  if (dlg.exec() != QDialog::Accepted) return;
  PushRequest r;
  r.repoId = repo->text().trimmed();
  r.revision = branch->text().trimmed().isEmpty() ? QString("main") : branch->text().trimmed();
  r.message = message->text();
  r.privateRepo = priv->isChecked();
  r.createPr = pr->isChecked();
  r.merged = format_->currentData().toBool();
  r.dtype = dtype_->currentText();
  QString err;
  if (!startPush(row, r, &err)) {
    pushStatus_->setStyleSheet("color: #c62828;");
    pushStatus_->setText(err.toHtmlEscaped());
  }
}

bool AdaptersPage::startPush(int row, const PushRequest& request, QString* error) {
  auto refuse = [&](const QString& why) {
    if (error) *error = why;
    return false;
  };
  if (exporting_) return refuse(tr("an export or a push is already running"));
  if (row < 0 || row >= table_->rowCount()) return refuse(tr("no such row"));
  try {  // checked before the export is written
    hub::validate_repo_id(request.repoId.toStdString());
    hub::validate_revision(request.revision.toStdString());
  } catch (const std::exception& e) {
    return refuse(QString::fromStdString(e.what()));
  }
  run::ExportOptions o;
  o.run_dir = runDir_.toStdString();
  const qint64 number = table_->item(row, Kind)->data(Qt::UserRole).toLongLong();
  if (table_->item(row, Kind)->text() == tr("checkpoint")) o.checkpoint_step = number;
  else o.version = number;
  // A fresh folder each time: export_run writes only into an absent or empty one.
  o.out_dir = QDir(QString::fromStdString(run::RunFolder(runDir_.toStdString()).path(run::RunFolder::kExportDir)))
                  .filePath(table_->item(row, Name)->text() + (request.merged ? "-merged" : "") + "-hub-" +
                            QDateTime::currentDateTime().toString("yyyyMMdd-hhmmss-zzz"))
                  .toStdString();
  o.merged = request.merged;
  o.dtype = request.dtype.toStdString();
  hub::PushOptions p;
  p.folder = o.out_dir;
  p.repo_id = request.repoId.toStdString();
  p.revision = request.revision.toStdString();
  p.private_repo = request.privateRepo;
  p.create_pr = request.createPr;
  p.commit_message = request.message.toStdString();
  exporting_ = true;
  export_->setEnabled(false);
  push_->setEnabled(false);
  pushStatus_->setStyleSheet(QString());
  pushStatus_->setText(tr("Exporting %1 for %2 ...").arg(table_->item(row, Name)->text(), request.repoId).toHtmlEscaped());
  QPointer<AdaptersPage> self(this);
  std::thread([self, o, p]() mutable {
    QString url, err;
    // Progress back to the GUI thread, at most every 100 ms and at the end of the upload.
    auto last = std::make_shared<std::chrono::steady_clock::time_point>();
    p.on_progress = [self, last](const hub::PushProgress& pr) {
      if (pr.stage != "uploading") return;
      const auto now = std::chrono::steady_clock::now();
      if (pr.bytes_done < pr.bytes_total && now - *last < std::chrono::milliseconds(100)) return;
      *last = now;
      const qint64 done = static_cast<qint64>(pr.bytes_done), total = static_cast<qint64>(pr.bytes_total);
      QMetaObject::invokeMethod(QCoreApplication::instance(), [self, done, total] {
        if (!self) return;
        self->pushStatus_->setText(self->tr("Uploading: %1 of %2 KiB").arg(done / 1024).arg(total / 1024));
        Q_EMIT self->pushProgress(done, total);
      }, Qt::QueuedConnection);
    };
    try {
      run::export_run(o);
      const hub::PushResult r = hub::push_folder(p);
      url = QString::fromStdString(!r.pr_url.empty() ? r.pr_url : !r.commit_url.empty() ? r.commit_url : r.repo_url);
    } catch (const std::exception& e) {
      err = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(QCoreApplication::instance(), [self, url, err] {
      if (!self) return;
      self->jobEnded(self->pushStatus_,
                     err.isEmpty() ? self->tr("Pushed: <a href=\"%1\">%2</a>").arg(url.toHtmlEscaped(), url.toHtmlEscaped())
                                   : err.toHtmlEscaped(),
                     !err.isEmpty());
      Q_EMIT self->pushFinished(url, err);
    }, Qt::QueuedConnection);
  }).detach();
  return true;
}

}  // namespace grpo::ui
