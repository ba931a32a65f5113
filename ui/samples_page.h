// Samples page: recent sampled completions (prompt, completion, reward, advantage, policy
// version) in a bounded table model, with a text filter and a "rewarded only" switch. Fed live
// from step reports, or from a past run's samples file (run::RunFolder::read_samples).
#pragma once

#include <deque>

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <QVector>
#include <QWidget>

#include "core/api/session.h"

class QCheckBox;
class QLineEdit;
class QTableView;

namespace grpo::ui {

class SampleTableModel : public QAbstractTableModel {
  Q_OBJECT
public:
  static constexpr size_t kMaxRows = 5000;  // default bound; the oldest rows go first
  enum Column { Step, Version, Group, Prompt, Completion, Answer, Reward, Advantage, Finish, ColumnCount };

  explicit SampleTableModel(QObject* parent = nullptr, size_t maxRows = kMaxRows)
      : QAbstractTableModel(parent), maxRows_(maxRows) {}
  size_t maxRows() const { return maxRows_; }
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

  void append(const std::vector<run::SampleRecord>& rows);
  void clear();
  const run::SampleRecord& at(int row) const { return rows_[static_cast<size_t>(row)]; }

private:
  std::deque<run::SampleRecord> rows_;
  size_t maxRows_;
};

// Rows matching the search text in prompt or completion, optionally only reward > 0.
class SampleFilterModel : public QSortFilterProxyModel {
  Q_OBJECT
public:
  using QSortFilterProxyModel::QSortFilterProxyModel;
  void setSearch(const QString& text);
  void setRewardedOnly(bool on);

protected:
  bool filterAcceptsRow(int row, const QModelIndex& parent) const override;

private:
  QString search_;
  bool rewardedOnly_ = false;
};

class SamplesPage : public QWidget {
  Q_OBJECT
public:
  explicit SamplesPage(QWidget* parent = nullptr);
  SampleTableModel* model() const { return model_; }
  SampleFilterModel* filter() const { return filter_; }
  void loadRun(const QString& runDir);  // the samples of a past run (replaces the rows)

public Q_SLOTS:
  void addReports(const QVector<::grpo::run::StepReport>& reports);

private:
  SampleTableModel* model_;
  SampleFilterModel* filter_;
  QLineEdit* search_;
  QCheckBox* rewarded_;
  QTableView* view_;
};

}  // namespace grpo::ui
