#include "ui/samples_page.h"

#include <cmath>

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QStringList>
#include <QLineEdit>
#include <QTableView>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>

#include "core/api/run_folder.h"

namespace grpo::ui {

int SampleTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int SampleTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant SampleTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
  const auto& r = rows_[static_cast<size_t>(index.row())];
  if (role == Qt::ToolTipRole && index.column() == Reward && !r.rewards.empty()) {
    QStringList parts;  // each reward function's own score
    for (const auto& [name, v] : r.rewards)
      parts << QString("%1: %2").arg(QString::fromStdString(name), std::isnan(v) ? QStringLiteral("—") : QString::number(v));
    return parts.join('\n');
  }
  if (role == Qt::DisplayRole || role == Qt::ToolTipRole) {
    switch (index.column()) {
      case Step: return static_cast<qlonglong>(r.step);
      case Version: return static_cast<qlonglong>(r.policy_version);
      case Group: return static_cast<qlonglong>(r.group);
      case Prompt: return QString::fromStdString(r.prompt);
      case Completion: return QString::fromStdString(r.completion);
      case Answer: return QString::fromStdString(r.answer);
      case Reward: return std::isnan(r.reward) ? QVariant(QStringLiteral("—")) : QVariant(r.reward);
      case Advantage: return r.advantage;
      case Finish: return QString::fromStdString(r.finish_reason);
    }
  }
  if (role == Qt::TextAlignmentRole && (index.column() <= Group || index.column() == Reward || index.column() == Advantage))
    return QVariant(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant SampleTableModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return QAbstractTableModel::headerData(section, o, role);
  static const char* names[] = {"step", "version", "group", "prompt", "completion", "answer", "reward", "advantage", "finish"};
  return section >= 0 && section < ColumnCount ? QVariant(tr(names[section])) : QVariant();
}

void SampleTableModel::append(const std::vector<run::SampleRecord>& rows) {
  if (rows.empty()) return;
  const size_t incoming = std::min(rows.size(), maxRows_);
  const size_t overflow = rows_.size() + incoming > maxRows_ ? rows_.size() + incoming - maxRows_ : 0;
  if (overflow > 0) {
    beginRemoveRows({}, 0, static_cast<int>(overflow) - 1);
    rows_.erase(rows_.begin(), rows_.begin() + static_cast<std::ptrdiff_t>(overflow));
    endRemoveRows();
  }
  const int first = static_cast<int>(rows_.size());
  beginInsertRows({}, first, first + static_cast<int>(incoming) - 1);
  rows_.insert(rows_.end(), rows.end() - static_cast<std::ptrdiff_t>(incoming), rows.end());
  endInsertRows();
}

void SampleTableModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
}

void SampleFilterModel::setSearch(const QString& text) {
  search_ = text;
  invalidateFilter();
}

void SampleFilterModel::setRewardedOnly(bool on) {
  rewardedOnly_ = on;
  invalidateFilter();
}

bool SampleFilterModel::filterAcceptsRow(int row, const QModelIndex& parent) const {
  auto* m = qobject_cast<SampleTableModel*>(sourceModel());
  if (!m || parent.isValid()) return true;
  const auto& r = m->at(row);
  if (rewardedOnly_ && !(r.reward > 0)) return false;
  if (search_.isEmpty()) return true;
  return QString::fromStdString(r.prompt).contains(search_, Qt::CaseInsensitive) ||
         QString::fromStdString(r.completion).contains(search_, Qt::CaseInsensitive);
}

SamplesPage::SamplesPage(QWidget* parent) : QWidget(parent) {
  model_ = new SampleTableModel(this);
  filter_ = new SampleFilterModel(this);
  filter_->setSourceModel(model_);
  filter_->setSortRole(Qt::DisplayRole);
  auto* lay = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  search_ = new QLineEdit;
  search_->setObjectName("sampleSearch");
  search_->setPlaceholderText(tr("Search prompts and completions"));
  search_->setClearButtonEnabled(true);
  rewarded_ = new QCheckBox(tr("Rewarded only"));
  bar->addWidget(new QLabel(tr("Filter:")));
  bar->addWidget(search_, 1);
  bar->addWidget(rewarded_);
  lay->addLayout(bar);
  view_ = new QTableView;
  view_->setObjectName("samplesView");
  view_->setModel(filter_);
  view_->setSortingEnabled(true);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setWordWrap(false);
  view_->horizontalHeader()->setSectionResizeMode(SampleTableModel::Prompt, QHeaderView::Stretch);
  view_->horizontalHeader()->setSectionResizeMode(SampleTableModel::Completion, QHeaderView::Stretch);
  view_->verticalHeader()->hide();
  lay->addWidget(view_, 1);
  connect(search_, &QLineEdit::textChanged, filter_, &SampleFilterModel::setSearch);
  connect(rewarded_, &QCheckBox::toggled, filter_, &SampleFilterModel::setRewardedOnly);
}

void SamplesPage::addReports(const QVector<::grpo::run::StepReport>& reports) {
  std::vector<run::SampleRecord> rows;
  for (const auto& r : reports) rows.insert(rows.end(), r.samples.begin(), r.samples.end());
  model_->append(rows);
}

void SamplesPage::loadRun(const QString& runDir) {
  model_->clear();
  if (runDir.isEmpty()) return;
  std::vector<run::SampleRecord> rows;
  // Only the newest rows the table keeps are read, from the end of the run's samples file.
  for (const auto& j : run::RunFolder(runDir.toStdString()).read_samples(model_->maxRows())) {
    run::SampleRecord s = run::sample_from_json(j);
    rows.push_back(std::move(s));
  }
  model_->append(rows);
}

}  // namespace grpo::ui
