// MetricStore: the dashboard's bounded history of a run's metrics (one series per TRL metric
// name, x = optimizer step) and its control events (pause, resume, retune, ...), plus the
// min/max downsampling that keeps a redraw cheap however long the run is (docs/ARCHITECTURE.md,
// "The dashboard's stores": bounded stores, redraw with replace()). Plain data; lives on the GUI
// thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <QPointF>
#include <QString>
#include <QVector>

namespace grpo::ui {

struct Marker {
  double step = 0;
  QString kind;   // pause, resume, retune, stop, error, a fault's kind, <fault>_cleared, ...
  QString text;   // a one-line description (a retune's old -> new values)
  QString severity = {};  // run::event_severity: "info", "warning", "error", or "cleared" for a fault's end
  QString label = {};     // run::event_label: what the marker reads ("retuned"); "" = the kind
};

class MetricStore {
public:
  // Points kept per series; past it, every other point is dropped (a run of 2^18 steps still
  // shows every step).
  static constexpr size_t kMaxPoints = size_t{1} << 18;
  static constexpr size_t kMaxMarkers = 256;

  void add(double step, const std::string& key, double value);  // NaN and inf are skipped
  void add_marker(Marker m);
  void clear();

  bool has(const std::string& key) const;
  std::vector<std::string> keys() const;
  std::vector<std::string> keys_matching(const std::string& prefix, const std::string& suffix) const;
  size_t size(const std::string& key) const;
  double last(const std::string& key, double fallback = 0) const;
  double max_step() const { return max_step_; }
  const std::vector<Marker>& markers() const { return markers_; }
  // Bumps on every change: a chart redraws only when the revision moved.
  uint64_t revision() const { return revision_; }
  uint64_t marker_revision() const { return marker_revision_; }  // bumps when markers change

  struct Series {
    std::vector<double> x, y;
    // Per block of kBlock points, the index of its minimum and maximum, kept as points arrive:
    // downsampling reads one summary per whole block inside a bucket instead of every point.
    std::vector<uint32_t> block_min, block_max;
  };
  static constexpr size_t kBlock = 64;
  const Series* series(const std::string& key) const;

  // At most 2 * buckets points of `key` over [x0, x1]: each bucket contributes its minimum and
  // maximum in x order, so spikes survive downsampling. Fewer points than that: all of them.
  QVector<QPointF> downsample(const std::string& key, double x0, double x1, int buckets) const;
  // Bucket means of `key` +- k * `std_key` (the reward band), aligned by step.
  void band(const std::string& key, const std::string& std_key, double x0, double x1, int buckets,
            QVector<QPointF>& upper, QVector<QPointF>& lower) const;

  // Writes every series as CSV: step,<key1>,<key2>,... (empty cells where a key has no value).
  std::string to_csv(const std::vector<std::string>& keys) const;

private:
  std::map<std::string, Series> series_;
  std::vector<Marker> markers_;
  double max_step_ = 0;
  uint64_t revision_ = 0, marker_revision_ = 0;
};

}  // namespace grpo::ui
