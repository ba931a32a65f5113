#include "ui/metric_store.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace grpo::ui {
namespace {

void summarize_last(MetricStore::Series& s) {
  const size_t i = s.y.size() - 1, b = i / MetricStore::kBlock;
  if (b == s.block_min.size()) {
    s.block_min.push_back(static_cast<uint32_t>(i));
    s.block_max.push_back(static_cast<uint32_t>(i));
    return;
  }
  if (s.y[i] < s.y[s.block_min[b]]) s.block_min[b] = static_cast<uint32_t>(i);
  if (s.y[i] > s.y[s.block_max[b]]) s.block_max[b] = static_cast<uint32_t>(i);
}

void resummarize(MetricStore::Series& s) {
  std::vector<double> x = std::move(s.x), y = std::move(s.y);
  s.x.clear();
  s.y.clear();
  s.block_min.clear();
  s.block_max.clear();
  for (size_t i = 0; i < x.size(); ++i) {
    s.x.push_back(x[i]);
    s.y.push_back(y[i]);
    summarize_last(s);
  }
}

}  // namespace

void MetricStore::add(double step, const std::string& key, double value) {
  if (!std::isfinite(value) || !std::isfinite(step)) return;
  Series& s = series_[key];
  if (!s.x.empty() && step <= s.x.back()) {
    // A resumed run replays steps after its checkpoint: the newer values replace the old.
    const auto cut = std::lower_bound(s.x.begin(), s.x.end(), step) - s.x.begin();
    s.x.resize(static_cast<size_t>(cut));
    s.y.resize(static_cast<size_t>(cut));
    resummarize(s);
  }
  if (s.x.size() >= kMaxPoints) {
    size_t w = 0;
    for (size_t i = 0; i < s.x.size(); i += 2, ++w) {
      s.x[w] = s.x[i];
      s.y[w] = s.y[i];
    }
    s.x.resize(w);
    s.y.resize(w);
    resummarize(s);
  }
  s.x.push_back(step);
  s.y.push_back(value);
  summarize_last(s);
  max_step_ = std::max(max_step_, step);
  ++revision_;
}

void MetricStore::add_marker(Marker m) {
  if (markers_.size() >= kMaxMarkers) markers_.erase(markers_.begin());
  markers_.push_back(std::move(m));
  ++revision_;
  ++marker_revision_;
}

void MetricStore::clear() {
  series_.clear();
  markers_.clear();
  max_step_ = 0;
  ++revision_;
  ++marker_revision_;
}

bool MetricStore::has(const std::string& key) const { return series_.count(key) > 0; }

std::vector<std::string> MetricStore::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, s] : series_) out.push_back(k);
  return out;
}

std::vector<std::string> MetricStore::keys_matching(const std::string& prefix, const std::string& suffix) const {
  std::vector<std::string> out;
  for (const auto& [k, s] : series_)
    if (k.size() >= prefix.size() + suffix.size() && k.compare(0, prefix.size(), prefix) == 0 &&
        k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(k);
  return out;
}

size_t MetricStore::size(const std::string& key) const {
  auto it = series_.find(key);
  return it == series_.end() ? 0 : it->second.x.size();
}

double MetricStore::last(const std::string& key, double fallback) const {
  auto it = series_.find(key);
  return it == series_.end() || it->second.y.empty() ? fallback : it->second.y.back();
}

const MetricStore::Series* MetricStore::series(const std::string& key) const {
  auto it = series_.find(key);
  return it == series_.end() ? nullptr : &it->second;
}

namespace {

// [first, last) indices of the points with x in [x0, x1].
std::pair<size_t, size_t> visible(const MetricStore::Series& s, double x0, double x1) {
  const size_t a = static_cast<size_t>(std::lower_bound(s.x.begin(), s.x.end(), x0) - s.x.begin());
  const size_t b = static_cast<size_t>(std::upper_bound(s.x.begin(), s.x.end(), x1) - s.x.begin());
  return {a, std::max(a, b)};
}

}  // namespace

QVector<QPointF> MetricStore::downsample(const std::string& key, double x0, double x1, int buckets) const {
  QVector<QPointF> out;
  const Series* s = series(key);
  if (!s || s->x.empty()) return out;
  const auto [a, b] = visible(*s, x0, x1);
  const size_t n = b - a;
  buckets = std::max(1, buckets);
  if (n <= static_cast<size_t>(2 * buckets)) {
    out.reserve(static_cast<int>(n));
    for (size_t i = a; i < b; ++i) out.append(QPointF(s->x[i], s->y[i]));
    return out;
  }
  out.reserve(2 * buckets);
  for (int k = 0; k < buckets; ++k) {
    const size_t lo = a + n * static_cast<size_t>(k) / static_cast<size_t>(buckets);
    const size_t hi = a + n * static_cast<size_t>(k + 1) / static_cast<size_t>(buckets);
    if (lo >= hi) continue;
    size_t imin = lo, imax = lo;
    for (size_t i = lo; i < hi;) {
      if (i % kBlock == 0 && i + kBlock <= hi) {  // a whole block: its summary
        const size_t b = i / kBlock;
        if (s->y[s->block_min[b]] < s->y[imin]) imin = s->block_min[b];
        if (s->y[s->block_max[b]] > s->y[imax]) imax = s->block_max[b];
        i += kBlock;
      } else {
        if (s->y[i] < s->y[imin]) imin = i;
        if (s->y[i] > s->y[imax]) imax = i;
        ++i;
      }
    }
    const size_t first = std::min(imin, imax), second = std::max(imin, imax);
    out.append(QPointF(s->x[first], s->y[first]));
    if (second != first) out.append(QPointF(s->x[second], s->y[second]));
  }
  return out;
}

void MetricStore::band(const std::string& key, const std::string& std_key, double x0, double x1, int buckets,
                       QVector<QPointF>& upper, QVector<QPointF>& lower) const {
  upper.clear();
  lower.clear();
  const Series* m = series(key);
  const Series* sd = series(std_key);
  if (!m || !sd || m->x.empty()) return;
  const auto [a, b] = visible(*m, x0, x1);
  const size_t n = b - a;
  if (n == 0) return;
  const size_t nb = std::min(n, static_cast<size_t>(std::max(1, buckets)));
  upper.reserve(static_cast<int>(nb));
  lower.reserve(static_cast<int>(nb));
  size_t j = 0;  // walks the std series alongside (both ascending in x)
  for (size_t k = 0; k < nb; ++k) {
    const size_t lo = a + n * k / nb, hi = a + n * (k + 1) / nb;
    double sx = 0, sm = 0, ss = 0;
    int cnt = 0;
    for (size_t i = lo; i < hi; ++i) {
      while (j < sd->x.size() && sd->x[j] < m->x[i]) ++j;
      if (j >= sd->x.size() || sd->x[j] != m->x[i]) continue;
      sx += m->x[i];
      sm += m->y[i];
      ss += sd->y[j];
      ++cnt;
    }
    if (cnt == 0) continue;
    upper.append(QPointF(sx / cnt, (sm + ss) / cnt));
    lower.append(QPointF(sx / cnt, (sm - ss) / cnt));
  }
}

std::string MetricStore::to_csv(const std::vector<std::string>& keys) const {
  std::set<double> steps;
  for (const auto& k : keys)
    if (const Series* s = series(k)) steps.insert(s->x.begin(), s->x.end());
  std::ostringstream out;
  out.precision(10);
  out << "step";
  for (const auto& k : keys) out << ',' << k;
  out << '\n';
  std::vector<size_t> pos(keys.size(), 0);
  for (double x : steps) {
    out << x;
    for (size_t i = 0; i < keys.size(); ++i) {
      out << ',';
      const Series* s = series(keys[i]);
      if (!s) continue;
      while (pos[i] < s->x.size() && s->x[pos[i]] < x) ++pos[i];
      if (pos[i] < s->x.size() && s->x[pos[i]] == x) out << s->y[pos[i]];
    }
    out << '\n';
  }
  return out.str();
}

}  // namespace grpo::ui
