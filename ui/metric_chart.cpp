#include "ui/metric_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <QAreaSeries>
#include <QContextMenuEvent>
#include <QFile>
#include <QFileDialog>
#include <QGuiApplication>
#include <QStyleHints>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMenu>
#include <QToolTip>
#include <QValueAxis>

namespace grpo::ui {
namespace {

const QColor kPalette[] = {QColor(0x1f, 0x77, 0xb4), QColor(0xd6, 0x27, 0x28), QColor(0x2c, 0xa0, 0x2c),
                           QColor(0xff, 0x7f, 0x0e), QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b),
                           QColor(0xe3, 0x77, 0xc2), QColor(0x17, 0xbe, 0xcf)};

QColor markerColor(const QString& kind, const QString& severity) {
  if (severity == "cleared") return QColor(0x20, 0x9f, 0x8f);
  if (severity == "warning") return QColor(0xe0, 0xa0, 0x00);
  if (kind == "pause") return QColor(0xff, 0x8c, 0x00);
  if (kind == "resume") return QColor(0x2e, 0x8b, 0x57);
  if (kind == "retune") return QColor(0x8a, 0x2b, 0xe2);
  return QColor(0xb2, 0x22, 0x22);  // stop, error
}

// A 1, 2 or 5 x 10^k step giving about `ticks` intervals over `range`.
double nice_step(double range, int ticks) {
  const double raw = range / std::max(1, ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

// Sets an axis only where something changed: each setter relayouts the chart and remaps every
// series, the largest share of a redraw's cost.
void setAxis(QValueAxis* a, double lo, double hi, double step) {
  if (a->tickType() != QValueAxis::TicksDynamic) a->setTickType(QValueAxis::TicksDynamic);
  if (a->tickAnchor() != 0) a->setTickAnchor(0);
  if (a->tickInterval() != step) a->setTickInterval(step);
  if (a->min() != lo || a->max() != hi) a->setRange(lo, hi);
}

void hideFromLegend(QChart* chart, QAbstractSeries* s) {
  for (auto* m : chart->legend()->markers(s)) m->setVisible(false);
}

}  // namespace

MetricChart::MetricChart(QString title, std::vector<LineSpec> lines, QWidget* parent)
    // The chart goes in through the constructor: QChartView(parent) makes a default chart that a
    // later setChart() releases without deleting (a whole QChart leaked per chart; LSan saw it).
    : QChartView(new QChart(), parent), title_(std::move(title)), specs_(std::move(lines)),
      referenceY_(std::numeric_limits<double>::quiet_NaN()) {
  QChart* c = chart();
  c->setTitle(title_);
  c->setMargins(QMargins(4, 4, 4, 4));
  c->legend()->setAlignment(Qt::AlignBottom);
  c->legend()->setFont(QFont(font().family(), 8));
  c->setTheme(palette().color(QPalette::Window).lightness() < 128 ? QChart::ChartThemeDark : QChart::ChartThemeLight);
  c->setBackgroundRoundness(0);
  QFont tf = c->titleFont();
  tf.setBold(true);
  c->setTitleFont(tf);
  axisX_ = new QValueAxis(c);
  axisY_ = new QValueAxis(c);
  axisX_->setLabelFormat("%d");
  axisX_->setTitleText("");
  axisY_->setLabelFormat("%.3g");
  QFont af(font().family(), 7);
  axisX_->setLabelsFont(af);
  axisY_->setLabelsFont(af);
  c->addAxis(axisX_, Qt::AlignBottom);
  c->addAxis(axisY_, Qt::AlignLeft);
  setRenderHint(QPainter::Antialiasing, true);
  setMinimumSize(260, 190);
  applyPalette();
#if QT_VERSION >= QT_VERSION_CHECK(6, 5, 0)
  // The platform's palette follows the scheme too (a PaletteChange); this covers styles that lag.
  connect(QGuiApplication::styleHints(), &QStyleHints::colorSchemeChanged, this, [this] { applyPalette(); });
#endif
  // Fixed (non-pattern) lines exist from the start, so the legend is complete before data arrives.
  int i = 0;
  for (const auto& s : specs_) {
    if (s.suffix.empty()) lineFor(s.key, s.label, s, i);
    ++i;
  }
}

MetricChart::Line& MetricChart::lineFor(const std::string& key, const QString& label, const LineSpec& spec, int index) {
  for (auto& l : lines_)
    if (l.key == key) return l;
  Line l;
  l.key = key;
  const QColor color = kPalette[lines_.size() % std::size(kPalette)];
  if (!spec.band_std.empty()) {
    l.upper = new QLineSeries(this);
    l.lower = new QLineSeries(this);
    l.band = new QAreaSeries(l.upper, l.lower);
    QColor fill = color;
    fill.setAlpha(50);
    l.band->setBrush(fill);
    l.band->setPen(Qt::NoPen);
    l.band->setName(label + " ± std");
    chart()->addSeries(l.band);
    l.band->attachAxis(axisX_);
    l.band->attachAxis(axisY_);
  }
  l.series = new QLineSeries();
  l.series->setName(label);
  QPen pen(color, 1.6);
  if (spec.dashed) pen.setStyle(Qt::DashLine);
  l.series->setPen(pen);
  chart()->addSeries(l.series);
  l.series->attachAxis(axisX_);
  l.series->attachAxis(axisY_);
  (void)index;
  lines_.push_back(l);
  return lines_.back();
}

void MetricChart::setOverlays(std::vector<Overlay> overlays) {
  overlays_ = std::move(overlays);
  for (auto* s : overlaySeries_) {
    chart()->removeSeries(s);
    delete s;
  }
  overlaySeries_.clear();
  int i = 0;
  for (const auto& o : overlays_) {
    auto* s = new QLineSeries();
    s->setName(o.label);
    QColor c = kPalette[(i + 3) % std::size(kPalette)];
    s->setPen(QPen(c, 1.2, Qt::DashLine));
    chart()->addSeries(s);
    s->attachAxis(axisX_);
    s->attachAxis(axisY_);
    overlaySeries_.push_back(s);
    ++i;
  }
  overlaysDirty_ = true;
}

void MetricChart::setReferenceLine(double y, const QString& label) {
  referenceY_ = y;
  if (!reference_) {
    reference_ = new QLineSeries();
    reference_->setPen(QPen(QColor(0x80, 0x80, 0x80), 1.0, Qt::DotLine));
    chart()->addSeries(reference_);
    reference_->attachAxis(axisX_);
    reference_->attachAxis(axisY_);
  }
  reference_->setName(label);
  overlaysDirty_ = true;
}

void MetricChart::redraw(const MetricStore& store, bool force) {
  if (!force && !overlaysDirty_ && &store == lastStore_ && store.revision() == lastRevision_) return;
  lastStore_ = &store;
  lastRevision_ = store.revision();
  overlaysDirty_ = false;

  double x1 = std::max(1.0, store.max_step());
  for (const auto& o : overlays_) x1 = std::max(x1, o.store->max_step());
  const double x0 = 0;
  // The x axis ends on a fifth of its tick step past the data, so a new step moves it rarely.
  const double xs = std::max(1.0, nice_step(x1 - x0, 5));
  const double grain = std::max(1.0, xs / 5);
  x1 = std::ceil(x1 / grain) * grain;
  const qreal width = chart()->plotArea().width();
  const int buckets = std::clamp(static_cast<int>(width > 10 ? width / 2 : 300), 50, 1200);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  auto extend = [&](const QVector<QPointF>& pts) {
    for (const auto& p : pts) {
      lo = std::min(lo, p.y());
      hi = std::max(hi, p.y());
    }
  };

  int index = 0;
  for (const auto& spec : specs_) {
    std::vector<std::pair<std::string, QString>> keys;
    if (spec.suffix.empty()) {
      keys.push_back({spec.key, spec.label});
    } else {
      for (const auto& k : store.keys_matching(spec.key, spec.suffix)) {
        QString name = QString::fromStdString(k.substr(spec.key.size(), k.size() - spec.key.size() - spec.suffix.size()));
        keys.push_back({k, spec.label.isEmpty() ? name : spec.label + " " + name});
      }
    }
    for (const auto& [key, label] : keys) {
      Line& l = lineFor(key, label, spec, index);
      QVector<QPointF> pts = store.downsample(key, x0, x1, buckets);
      extend(pts);
      // Sparse series (eval every N steps, a single point) show their points; dense ones a line.
      const bool sparse = pts.size() < 2 || (pts.back().x() - pts.front().x()) / (pts.size() - 1) >= 4;
      if (l.series->pointsVisible() != sparse) l.series->setPointsVisible(sparse);
      if (l.series->points() != pts) l.series->replace(pts);  // unchanged: no remap, no repaint
      if (l.band) {
        QVector<QPointF> up, down;
        store.band(key, spec.band_std, x0, x1, buckets, up, down);
        extend(up);
        extend(down);
        l.upper->replace(up);
        l.lower->replace(down);
      }
    }
    ++index;
  }
  if (!lines_.empty()) {
    for (size_t i = 0; i < overlays_.size(); ++i) {
      QVector<QPointF> pts = overlays_[i].store->downsample(lines_.front().key, x0, x1, buckets);
      extend(pts);
      overlaySeries_[i]->replace(pts);
    }
  }
  if (reference_ && std::isfinite(referenceY_)) {
    reference_->replace(QVector<QPointF>{QPointF(x0, referenceY_), QPointF(x1, referenceY_)});
    lo = std::min(lo, referenceY_);
    hi = std::max(hi, referenceY_);
  }
  if (!std::isfinite(lo)) {
    lo = 0;
    hi = 1;
  }
  if (hi - lo < 1e-12) {
    const double pad = std::max(1e-6, std::fabs(hi) * 0.05);
    lo -= pad;
    hi += pad;
  } else {
    const double pad = (hi - lo) * 0.06;
    lo -= pad;
    hi += pad;
  }
  // Ticks anchored at 0 on round steps (whole steps on x), so labels read 0.2, not 5.55e-17.
  setAxis(axisX_, x0, x1, xs);
  const double ys = nice_step(hi - lo, 4);
  lo = std::floor(lo / ys) * ys;
  hi = std::ceil(hi / ys) * ys;
  setAxis(axisY_, lo, hi, ys);

  // Control events as dashed vertical lines across the whole plot.
  const MarkerKey key{&store, store.marker_revision(), x0, x1, lo, hi};
  if (key == markerKey_) return;
  markerKey_ = key;
  const auto& ms = store.markers();
  size_t used = 0;
  for (const auto& m : ms) {
    if (m.step < x0 || m.step > x1) continue;
    if (used == markers_.size()) {
      auto* s = new QLineSeries();
      chart()->addSeries(s);
      s->attachAxis(axisX_);
      s->attachAxis(axisY_);
      hideFromLegend(chart(), s);
      connect(s, &QLineSeries::hovered, this, [this, s](const QPointF&, bool on) {
        if (on) QToolTip::showText(QCursor::pos(), s->property("marker_text").toString(), this);
      });
      markers_.push_back(s);
    }
    QLineSeries* s = markers_[used++];
    s->setPen(QPen(markerColor(m.kind, m.severity), 1.2, Qt::DashLine));
    s->setProperty("marker_text", (m.label.isEmpty() ? m.kind : m.label) + " @ step " + QString::number(m.step) +
                                      (m.text.isEmpty() ? "" : ": " + m.text));
    s->replace(QVector<QPointF>{QPointF(m.step, lo), QPointF(m.step, hi)});
    s->setVisible(true);
  }
  for (size_t i = used; i < markers_.size(); ++i) markers_[i]->setVisible(false);
}

void MetricChart::applyPalette() {
  const QPalette p = palette();
  const QColor bg = p.color(QPalette::Base), fg = p.color(QPalette::WindowText);
  QColor grid = p.color(QPalette::Mid);
  grid.setAlpha(110);
  chart()->setBackgroundBrush(bg);
  chart()->setPlotAreaBackgroundVisible(false);
  chart()->setTitleBrush(fg);
  chart()->legend()->setLabelColor(fg);
  for (QValueAxis* a : {axisX_, axisY_}) {
    a->setLabelsColor(fg);
    a->setTitleBrush(fg);
    a->setLinePenColor(p.color(QPalette::Mid));
    a->setGridLineColor(grid);
    a->setMinorGridLineColor(grid);
  }
  setBackgroundBrush(bg);
}

void MetricChart::changeEvent(QEvent* event) {
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::ApplicationPaletteChange) applyPalette();
  QChartView::changeEvent(event);
}

std::vector<std::string> MetricChart::drawnKeys() const {
  std::vector<std::string> out;
  for (const auto& l : lines_) out.push_back(l.key);
  return out;
}

int MetricChart::pointCount() const {
  int n = 0;
  for (const auto& l : lines_) n += static_cast<int>(l.series->count());
  return n;
}

int MetricChart::markerCount() const {
  int n = 0;
  for (auto* s : markers_) n += s->isVisible() ? 1 : 0;
  return n;
}

bool MetricChart::savePng(const QString& path) { return grab().save(path, "PNG"); }

bool MetricChart::saveCsv(const QString& path) const {
  if (!lastStore_) return false;
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return false;
  const std::string csv = lastStore_->to_csv(drawnKeys());
  return f.write(csv.data(), static_cast<qint64>(csv.size())) == static_cast<qint64>(csv.size());
}

void MetricChart::contextMenuEvent(QContextMenuEvent* event) {
  QMenu menu(this);
  QString base = title_.toLower().replace(' ', '-').replace('/', '-');
  menu.addAction(tr("Save chart as PNG..."), this, [this, base] {
    QString p = QFileDialog::getSaveFileName(this, tr("Save chart"), base + ".png", tr("PNG images (*.png)"));
    if (!p.isEmpty()) savePng(p);
  });
  menu.addAction(tr("Save data as CSV..."), this, [this, base] {
    QString p = QFileDialog::getSaveFileName(this, tr("Save data"), base + ".csv", tr("CSV files (*.csv)"));
    if (!p.isEmpty()) saveCsv(p);
  });
  menu.exec(event->globalPos());
}

}  // namespace grpo::ui
