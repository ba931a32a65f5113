// Adapters page: a run's published adapter versions (adapters/policy-v<N>), checkpoints
// (checkpoints/step-<S>), both listed by run::RunFolder, and final adapter, and their export as a PEFT adapter folder or a
// merged model (core/run/export.h), and "Push to Hub...": the same export into a fresh folder
// under the run's export folder, then that folder pushed to a Hub repo as one commit
// (core/api/hub.h; HF_ENDPOINT and the token as huggingface_hub reads them), with progress in
// bytes and a link to the commit. Export and push run on a worker thread; results come back as
// signals.
#pragma once

#include <QWidget>

#include <algorithm>

class QComboBox;
class QLabel;
class QPushButton;
class QTableWidget;

namespace grpo::ui {

class AdaptersPage : public QWidget {
  Q_OBJECT
public:
  explicit AdaptersPage(QWidget* parent = nullptr);

  void setRunDir(const QString& runDir);  // rescans
  void refresh();
  QString runDir() const { return runDir_; }
  int rowCount() const;
  QTableWidget* table() const { return table_; }
  // Exports row `row` (its version or checkpoint) into outDir; false when refused at once (the
  // reason in *error). The result arrives as exportFinished.
  bool startExport(int row, const QString& outDir, bool merged, const QString& dtype, QString* error = nullptr);

  // What "Push to Hub..." asks for.
  struct PushRequest {
    QString repoId, revision = "main", message;
    bool privateRepo = false, createPr = false, merged = false;
    QString dtype = "f32";
  };
  // Exports row `row` into a fresh folder under the run's export folder and pushes it; false when
  // refused at once (a bad repo id or branch, a job already running; the reason in *error).
  // Progress arrives as pushProgress (LFS bytes sent of the total), the result as pushFinished
  // (the commit's or pull request's URL, or an error).
  bool startPush(int row, const PushRequest& request, QString* error = nullptr);

Q_SIGNALS:
  void exportFinished(const QString& outDir, const QString& error);
  void pushProgress(qint64 done, qint64 total);
  void pushFinished(const QString& url, const QString& error);

private:
  void exportSelected();
  void pushSelected();  // the dialog

  QString runDir_;
  QTableWidget* table_;
  QPushButton *export_, *push_;
  QComboBox *format_, *dtype_;
  QLabel *status_, *pushStatus_;
  bool exporting_ = false;  // an export or a push is running
  void jobEnded(QLabel* label, const QString& text, bool failed);
};

}  // namespace grpo::ui
