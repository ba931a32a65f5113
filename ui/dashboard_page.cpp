#include "ui/dashboard_page.h"

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

#include "core/api/run_folder.h"
#include "ui/run_history.h"

namespace grpo::ui {
namespace {

LineSpec line(std::string key, QString label, bool dashed = false) {
  LineSpec l;
  l.key = std::move(key);
  l.label = std::move(label);
  l.dashed = dashed;
  return l;
}

LineSpec banded(std::string key, QString label, std::string std_key) {
  LineSpec l = line(std::move(key), std::move(label));
  l.band_std = std::move(std_key);
  return l;
}

LineSpec pattern(std::string prefix, std::string suffix) {
  LineSpec l;
  l.key = std::move(prefix);
  l.suffix = std::move(suffix);
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
  const std::vector<std::pair<QString, std::vector<LineSpec>>> layout = {
      {tr("Reward"), {banded("reward", tr("mean"), "reward_std")}},
      {tr("Reward per function"), {pattern("rewards/", "/mean")}},
      {tr("Eval accuracy"), {line("eval/accuracy", tr("greedy accuracy"))}},
      {tr("Staleness (versions)"), {line("sample/staleness_mean", tr("mean")), line("sample/staleness_max", tr("max")),
                                    line("sample/dropped_stale_total", tr("dropped"))}},
      {tr("Throughput (tok/s)"), {line("rollout/generated_tok_s", tr("generated")), line("trained_tok_s", tr("trained"))}},
      {tr("Rollout queue (groups)"), {line("sample/rollout_queue_size", tr("occupancy")),
                                      line("rollout/score_queue_size", tr("scorer queue"), true)}},
      {tr("Waits (s per step)"), {line("perf/rollout_wait_s", tr("trainer waits for rollouts")),
                                  line("rollout/backpressure_s", tr("back-pressure"))}},
      {tr("Step time (s)"), {line("perf/step_s", tr("step")), line("perf/fwd_bwd_s", tr("forward+backward")),
                             line("perf/optimizer_s", tr("optimizer"))}},
      {tr("KL"), {line("kl", tr("kl"))}},
      {tr("Ratio and clipping"), {line("ratio_min", tr("ratio min")), line("ratio_max", tr("ratio max")),
                                  line("clip_ratio/region_mean", tr("clip fraction"), true)}},
      {tr("Completion length (tokens)"), {line("completions/mean_length", tr("mean")),
                                          line("completions/min_length", tr("min"), true),
                                          line("completions/max_length", tr("max"), true)}},
      {tr("Learning rate"), {line("learning_rate", tr("lr"))}},
  };
  int i = 0;
  for (const auto& [title, lines] : layout) {
    auto* c = new MetricChart(title, lines);
    c->setObjectName("chart:" + title);
    charts_.push_back(c);
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

void DashboardPage::clear() {
  store_.clear();
  events_->clear();
  setVerdict("", "");
  redrawNow(true);
}

void DashboardPage::setQueueBound(double groups) {
  if (auto* c = chart(tr("Rollout queue (groups)"))) c->setReferenceLine(groups, tr("bound"));
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
    const QString severity = QString::fromStdString(e.data.value("severity", std::string()));
    auto* item = new QListWidgetItem(tr("step %1 · %2%3").arg(e.step).arg(describe_event(e.data),
                                                                       advice.isEmpty() ? QString() : " — " + advice));
    item->setData(Qt::UserRole, QString::fromStdString(e.kind));
    item->setToolTip(QString::fromStdString(e.data.dump(1)));
    if (!advice.isEmpty()) {
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
