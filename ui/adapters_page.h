// Adapters page: a run's published adapter versions (adapters/policy-v<N>), checkpoints
// (checkpoints/step-<S>), both listed by run::RunFolder, and final adapter, and their export as a PEFT adapter folder or a
// merged model (core/run/export.h). Export runs on a worker thread; the result comes back as a
// signal.
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

Q_SIGNALS:
  void exportFinished(const QString& outDir, const QString& error);

private:
  void exportSelected();

  QString runDir_;
  QTableWidget* table_;
  QPushButton* export_;
  QComboBox *format_, *dtype_;
  QLabel* status_;
  bool exporting_ = false;
};

}  // namespace grpo::ui
