#include "ui/dashboard_page.h"

#include <QCoreApplication>
#include <QDir>
#include <QGridLayout>
#include <QRegularExpression>
#include <QLabel>
#include <QListWidget>
#include <QSplitter>
#include <QScrollArea>
#include <QTimer>
#include <QStyle>
#include <QVBoxLayout>

#include "core/api/charts.h"
#include "core/api/run_folder.h"
#include "ui/run_history.h"

namespace grpo::ui {
namespace {

// A chart line of the catalogue (core/records/charts.h) as MetricChart draws it. The catalogue's
// English texts go through the "charts" translation context.
LineSpec line_spec(const run::ChartLine& c) {
  LineSpec l;
  l.key = c.key;
  l.label = QCoreApplication::translate("charts", c.label.c_str());
  l.suffix = c.suffix;
  l.band_std = c.band_std;
  l.dashed = c.dashed;
  return l;
}

}  // namespace

DashboardPage::DashboardPage(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(6, 6, 6, 6);
  title_ = new QLabel(tr("No run yet: press Start (Ctrl+R) to train the demo, or open a past run."));
  title_->setObjectName("dashboardTitle");
  verdict_ = new QLabel;
  verdict_->setObjectName("verdict");
  QFont vf = verdict_->font();
  vf.setBold(true);
  verdict_->setFont(vf);
  advice_ = new QLabel;
  advice_->setObjectName("advice");
  advice_->setWordWrap(true);
  auto* head = new QHBoxLayout;
  head->addWidget(title_, 1);
  head->addWidget(verdict_);
  outer->addLayout(head);
  outer->addWidget(advice_);

  auto* grid_host = new QWidget;
  auto* grid = new QGridLayout(grid_host);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->setSpacing(4);
  int i = 0;
  for (const auto& spec : run::chart_catalogue()) {
    std::vector<LineSpec> lines;
    for (const auto& l : spec.lines) lines.push_back(line_spec(l));
    auto* c = new MetricChart(QCoreApplication::translate("charts", spec.title.c_str()), std::move(lines));
    c->setObjectName(QString::fromStdString("chart:" + spec.id));
    c->setToolTip(QString::fromStdString(run::chart_help(spec)));  // the browser's hover text too
    charts_.push_back(c);
    chart_ids_.push_back(spec.id);
    grid->addWidget(c, i / 4, i % 4);
    ++i;
  }
  auto* scroll = new QScrollArea;
  scroll->setWidget(grid_host);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  events_ = new QListWidget;
  events_->setObjectName("eventsList");
  events_->setToolTip(tr("The run's events (%1); faults carry advice on what to do").arg(run::RunFolder::kEventsFile));
  events_->setUniformItemSizes(true);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(scroll);
  split->addWidget(events_);
  split->setStretchFactor(0, 1);
  split->setSizes({800, 110});
  outer->addWidget(split, 1);

  timer_ = new QTimer(this);
  timer_->setInterval(40);
  connect(timer_, &QTimer::timeout, this, [this] { redrawNow(); });
  timer_->start();
}

MetricChart* DashboardPage::chart(const QString& title) const {
  for (auto* c : charts_)
    if (c->title() == title) return c;
  return nullptr;
}

MetricChart* DashboardPage::chartById(const std::string& id) const {
  for (size_t i = 0; i < charts_.size() && i < chart_ids_.size(); ++i)
    if (chart_ids_[i] == id) return charts_[i];
  return nullptr;
}

void DashboardPage::clear() {
  store_.clear();
  events_->clear();
  setVerdict("", "");
  redrawNow(true);
}

void DashboardPage::setQueueBound(double groups) {
  if (auto* c = chartById("queue")) c->setReferenceLine(groups, tr("bound"));
}

void DashboardPage::setTitle(const QString& text) { title_->setText(text); }

void DashboardPage::setVerdict(const QString& verdict, const QString& advice) {
  verdict_->setText(verdict.isEmpty() ? QString() : tr("Bottleneck: %1").arg(verdict));
  advice_->setText(advice);
  advice_->setVisible(!advice.isEmpty());
}

QString DashboardPage::verdictText() const { return verdict_->text(); }

void DashboardPage::redrawNow(bool force) {
  if (!isVisible() && !force) return;  // a hidden dashboard costs nothing; shown, it catches up
  for (auto* c : charts_) c->redraw(store_, force);
}

void DashboardPage::addReports(const QVector<::grpo::run::StepReport>& reports) {
  for (const auto& r : reports) add_step(store_, r);
  if (!reports.isEmpty())
    setVerdict(QString::fromStdString(reports.back().verdict), QString::fromStdString(reports.back().advice));
}

void DashboardPage::addEvents(const QVector<::grpo::run::EngineEvent>& events) {
  for (const auto& e : events) {
    add_event_marker(store_, e.data);
    const QString advice = event_advice(e.data);
    const std::string severity = run::event_severity(e.data);  // the catalogue's rule (catalogue.h)
    auto* item = new QListWidgetItem(tr("step %1 · %2%3").arg(e.step).arg(describe_event(e.data),
                                                                       advice.isEmpty() ? QString() : " — " + advice));
    item->setData(Qt::UserRole, QString::fromStdString(e.kind));
    item->setToolTip(QString::fromStdString(e.data.dump(1)));
    item->setData(Qt::UserRole + 1, QString::fromStdString(severity));
    if (severity == "warning" || severity == "error") {
      item->setForeground(severity == "warning" ? QColor(0xc0, 0x80, 0x00) : QColor(0xc6, 0x28, 0x28));
      item->setIcon(style()->standardIcon(severity == "warning" ? QStyle::SP_MessageBoxWarning : QStyle::SP_MessageBoxCritical));
    }
    events_->addItem(item);
  }
  while (events_->count() > kMaxEvents) delete events_->takeItem(0);
  if (!events.isEmpty()) events_->scrollToBottom();
}

bool DashboardPage::saveAllPng(const QString& dir, QStringList* written) {
  QDir().mkpath(dir);
  redrawNow(true);
  bool ok = true;
  int i = 0;
  for (auto* c : charts_) {
    QString slug = c->title().toLower().replace(QRegularExpression("[^a-z0-9]+"), "-");
    while (slug.endsWith('-')) slug.chop(1);
    const QString name = QString("%1-%2.png").arg(++i, 2, 10, QChar('0')).arg(slug);
    const QString path = QDir(dir).filePath(name);
    const bool saved = c->savePng(path);
    ok = ok && saved;
    if (saved && written) written->append(path);
  }
  return ok;
}

}  // namespace grpo::ui
