// Runs page: past run directories (recent ones remembered in QSettings). Opening one shows its
// charts on the dashboard (its metrics and events); checked runs are overlaid on the
// dashboard's charts to compare with the current one.
#pragma once

#include <map>
#include <memory>

#include <QWidget>

#include "ui/metric_chart.h"

class QLabel;
class QListWidget;

namespace grpo::ui {

class RunsPage : public QWidget {
  Q_OBJECT
public:
  static constexpr int kMaxRecent = 20;
  explicit RunsPage(QWidget* parent = nullptr);

  // Adds a run to the list (and the recent runs); false with *error when it is not a run.
  bool addRun(const QString& runDir, QString* error = nullptr);
  QStringList runs() const;
  std::vector<Overlay> overlays() const;  // the checked runs
  void setChecked(const QString& runDir, bool on);

Q_SIGNALS:
  void openRequested(const QString& runDir);  // show it on the dashboard
  void attachRequested();                      // "Attach to run..." (a headless grpo train)
  void overlaysChanged();

private:
  void rememberRecent(const QString& runDir);

  QListWidget* list_;
  QLabel* status_;
  std::map<QString, std::shared_ptr<MetricStore>> stores_;
};

}  // namespace grpo::ui
