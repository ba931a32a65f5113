// MetricChart: one dashboard chart (Qt Charts) over a MetricStore: lines by metric name, an
// optional mean +- std band, lines found by pattern (one per reward function), overlays of other
// runs, and the run's control events as dashed vertical markers. redraw() replaces each series'
// points at once (never per-point appends) with at most ~2 points per pixel column. Context
// menu: save as PNG or CSV.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <QChartView>
#include <QColor>

#include "ui/metric_store.h"

class QAreaSeries;
class QLineSeries;
class QValueAxis;

namespace grpo::ui {

struct LineSpec {
  std::string key;       // metric name; with `suffix` set, a prefix matched against the store
  QString label;
  std::string suffix;    // pattern lines: every key prefix*suffix gets its own line
  std::string band_std;  // draw key +- this metric as a shaded band
  bool dashed = false;
};

struct Overlay {  // another run's history, drawn under this chart's first line
  QString label;
  std::shared_ptr<const MetricStore> store;
};

class MetricChart : public QChartView {
  Q_OBJECT
public:
  MetricChart(QString title, std::vector<LineSpec> lines, QWidget* parent = nullptr);

  // Recomputes every series from `store` if it changed since the last redraw (or `force`).
  void redraw(const MetricStore& store, bool force = false);
  void setOverlays(std::vector<Overlay> overlays);
  void setReferenceLine(double y, const QString& label);  // e.g. the queue's bound; NaN = none

  QString title() const { return title_; }
  // The metric keys drawn (resolved patterns included), for CSV export and tests.
  std::vector<std::string> drawnKeys() const;
  int pointCount() const;    // points currently in the visible line series
  int markerCount() const;   // visible event markers
  bool savePng(const QString& path);
  bool saveCsv(const QString& path) const;

  // Re-themes background, title, legend and axes from the widget's palette (called on every
  // palette change: the system's light/dark switch reaches the charts live).
  void applyPalette();

protected:
  void contextMenuEvent(QContextMenuEvent* event) override;
  void changeEvent(QEvent* event) override;

private:
  struct Line {
    std::string key;
    QLineSeries* series = nullptr;
    QAreaSeries* band = nullptr;
    QLineSeries *upper = nullptr, *lower = nullptr;
  };
  Line& lineFor(const std::string& key, const QString& label, const LineSpec& spec, int index);

  QString title_;
  std::vector<LineSpec> specs_;
  std::vector<Line> lines_;
  std::vector<QLineSeries*> overlaySeries_;
  std::vector<Overlay> overlays_;
  std::vector<QLineSeries*> markers_;  // pooled vertical lines
  QLineSeries* reference_ = nullptr;
  double referenceY_;
  QValueAxis *axisX_, *axisY_;
  const MetricStore* lastStore_ = nullptr;
  uint64_t lastRevision_ = ~uint64_t{0};
  struct MarkerKey {
    const MetricStore* store = nullptr;
    uint64_t revision = ~uint64_t{0};
    double x0 = 0, x1 = 0, lo = 0, hi = 0;
    bool operator==(const MarkerKey&) const = default;
  } markerKey_;  // the markers are redrawn only when this changes
  bool overlaysDirty_ = false;
};

}  // namespace grpo::ui
