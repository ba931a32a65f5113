// DashboardPage: the live charts of a run, one per entry of the chart catalogue (core/records/charts.h;
// docs/dashboard.md, "Watching a live run"; drawing: docs/ARCHITECTURE.md, "The dashboard's
// stores"), the rollout queue's against its bound, with the bottleneck verdict and its advice above
// them, and the run's events (faults with their advice highlighted) in a bounded
// list below them. Data goes into a bounded MetricStore; a 25 Hz timer redraws only when the
// store changed.
#pragma once

#include <string>
#include <vector>

#include <QVector>
#include <QWidget>

#include "core/api/session.h"
#include "ui/metric_chart.h"
#include "ui/metric_store.h"

class QLabel;
class QListWidget;
class QTimer;

namespace grpo::ui {

class DashboardPage : public QWidget {
  Q_OBJECT
public:
  explicit DashboardPage(QWidget* parent = nullptr);

  MetricStore& store() { return store_; }
  const std::vector<MetricChart*>& charts() const { return charts_; }
  MetricChart* chart(const QString& title) const;
  // By the catalogue's id (core/records/charts.h), e.g. "queue".
  MetricChart* chartById(const std::string& id) const;
  // The catalogue ids of charts(), in the same order.
  const std::vector<std::string>& chartIds() const { return chart_ids_; }

  void clear();
  void setQueueBound(double groups);  // the rollout queue's capacity, in groups
  void setTitle(const QString& text);
  void setVerdict(const QString& verdict, const QString& advice);
  QString verdictText() const;
  void redrawNow(bool force = false);  // also what the timer calls
  bool saveAllPng(const QString& dir, QStringList* written = nullptr);
  static constexpr int kMaxEvents = 500;  // rows kept in the events list (oldest go first)
  QListWidget* eventsList() const { return events_; }

public Q_SLOTS:
  void addReports(const QVector<::grpo::run::StepReport>& reports);
  void addEvents(const QVector<::grpo::run::EngineEvent>& events);

private:
  MetricStore store_;
  std::vector<MetricChart*> charts_;
  std::vector<std::string> chart_ids_;
  QLabel *title_, *verdict_, *advice_;
  QListWidget* events_;
  QTimer* timer_;
};

}  // namespace grpo::ui
