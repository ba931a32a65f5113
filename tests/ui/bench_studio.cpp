// studio_bench: the desktop app's two speed numbers (issue 6; BENCHMARKS.md), not a test:
//   redraw   the dashboard holding 100,000 points in every series: time to recompute and
//            replace every chart's series after a new step in every series (downsampling
//            included), and to paint the window
//   latency  GUI event-loop latency while the demo trains at full load: a 5 ms timer's lateness
//            (p50, p99, max) over the measured window
// Usage: studio_bench [--points N] [--seconds S] [--steps N]   (QT_QPA_PLATFORM=offscreen works)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <time.h>
#include <vector>

#include <QApplication>
#include <QElapsedTimer>
#include <QLineEdit>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTimer>

#include "ui/dashboard_page.h"
#include "ui/main_window.h"
#include "ui/setup_page.h"

using namespace grpo::ui;

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())) - 1));
  return v[i];
}

// This thread's CPU time: on a machine shared with other builds, wall time mostly measures waiting.
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

int arg_int(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QStandardPaths::setTestModeEnabled(true);
  const int points = arg_int(argc, argv, "--points", 100000);
  const int seconds = arg_int(argc, argv, "--seconds", 30);
  const int steps = arg_int(argc, argv, "--steps", 300);

  // ---- redraw with `points` points per series
  {
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    w.showPage(w.dashboard());
    QApplication::processEvents();
    MetricStore& s = w.dashboard()->store();
    std::mt19937 rng(1);
    std::normal_distribution<double> noise(0, 1);
    const char* keys[] = {"reward", "reward_std", "rewards/accuracy/mean", "rewards/format/mean", "eval/accuracy",
                          "sample/staleness_mean", "sample/staleness_max", "sample/dropped_stale_total",
                          "rollout/generated_tok_s", "trained_tok_s", "sample/rollout_queue_size",
                          "rollout/score_queue_size", "perf/rollout_wait_s", "rollout/backpressure_s", "perf/step_s",
                          "perf/fwd_bwd_s", "perf/optimizer_s", "kl", "ratio_min", "ratio_max",
                          "clip_ratio/region_mean", "completions/mean_length", "completions/min_length",
                          "completions/max_length", "learning_rate"};
    for (int i = 1; i <= points; ++i)
      for (const char* k : keys) s.add(i, k, std::sin(i * 1e-3) + 0.2 * noise(rng));
    for (int m = 0; m < 40; ++m) s.add_marker({double(m) * points / 40.0, m % 3 ? "pause" : "retune", "x"});
    size_t series = 0;
    for (auto* c : w.dashboard()->charts()) series += c->drawnKeys().size();
    std::vector<double> replace_ms, paint_ms, sample_ms, replace_cpu_ms, paint_cpu_ms;
    for (int r = 0; r < 30; ++r) {  // the store's share: downsampling every series to 300 buckets
      QElapsedTimer t;
      t.start();
      size_t n = 0;
      for (const char* k : keys) n += static_cast<size_t>(s.downsample(k, 0, points + 1, 300).size());
      sample_ms.push_back(t.nsecsElapsed() / 1e6);
      if (n == 0) return 1;
    }
    std::printf("downsample: %zu series x %d points to 300 buckets: p50 %.2f ms\n", std::size(keys), points,
                percentile(sample_ms, 0.5));
    for (int r = 0; r < 30; ++r) {
      for (const char* k : keys) s.add(points + r + 1, k, 0.5);  // a new step in every series, as a live run adds
      QElapsedTimer t;
      t.start();
      double cpu = thread_cpu_ms();
      w.dashboard()->redrawNow(true);
      replace_ms.push_back(t.nsecsElapsed() / 1e6);
      replace_cpu_ms.push_back(thread_cpu_ms() - cpu);
      t.restart();
      cpu = thread_cpu_ms();
      w.repaint();  // synchronous paint of the whole window (all charts)
      paint_ms.push_back(t.nsecsElapsed() / 1e6);
      paint_cpu_ms.push_back(thread_cpu_ms() - cpu);
    }
    std::printf("redraw: %d points x %zu series in %zu charts: update p50 %.2f ms, p99 %.2f ms; paint p50 %.2f ms, "
                "p99 %.2f ms; total p50 %.2f ms\n",
                points, series, w.dashboard()->charts().size(), percentile(replace_ms, 0.5), percentile(replace_ms, 0.99),
                percentile(paint_ms, 0.5), percentile(paint_ms, 0.99),
                percentile(replace_ms, 0.5) + percentile(paint_ms, 0.5));
    std::printf("redraw CPU time (this thread): update p50 %.2f ms, paint p50 %.2f ms, total p50 %.2f ms\n",
                percentile(replace_cpu_ms, 0.5), percentile(paint_cpu_ms, 0.5),
                percentile(replace_cpu_ms, 0.5) + percentile(paint_cpu_ms, 0.5));
  }

  // ---- event-loop latency while the demo trains
  {
    QTemporaryDir tmp;
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    w.setupPage()->loadPreset("demo");
    w.setupPage()->field("max_steps")->setText(QString::number(steps));
    w.setupPage()->setRunDirectory(tmp.filePath("run"));
    if (!w.startRun()) {
      std::fprintf(stderr, "cannot start the demo\n");
      return 1;
    }
    // Measure only once training runs (the model has loaded and steps arrive).
    QElapsedTimer wait;
    wait.start();
    while (w.controller()->step() < 1 && wait.elapsed() < 300000) QApplication::processEvents(QEventLoop::AllEvents, 50);
    std::vector<double> late_ms;
    QElapsedTimer clock;
    clock.start();
    qint64 last = clock.nsecsElapsed();
    const int64_t step0 = w.controller()->step();
    QTimer tick;
    tick.setTimerType(Qt::PreciseTimer);
    tick.setInterval(5);
    QObject::connect(&tick, &QTimer::timeout, [&] {
      const qint64 now = clock.nsecsElapsed();
      late_ms.push_back(std::max(0.0, (now - last) / 1e6 - 5.0));
      last = now;
      if (now > qint64(seconds) * 1000000000LL || !w.controller()->active()) app.quit();
    });
    tick.start();
    app.exec();
    const int64_t steps_seen = w.controller()->step() - step0;
    w.controller()->stop();
    std::printf("latency: %zu ticks over %.1f s while training %lld demo steps: lateness p50 %.2f ms, p99 %.2f ms, "
                "max %.2f ms\n",
                late_ms.size(), clock.elapsed() / 1000.0, static_cast<long long>(steps_seen), percentile(late_ms, 0.5),
                percentile(late_ms, 0.99), percentile(late_ms, 1.0));
  }
  return 0;
}
