// ThroughputAdvisor: after each step of the async engine, how busy each side of the pipeline
// was over the step's window (trainer, generators, scorer), and the bottleneck verdict with what
// the user should do about it (the dashboard's verdict line, the metrics record's "verdict").
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace grpo::run {

// Cumulative counters of the rollout pipeline, read once per step.
struct PipelineCounters {
  int64_t tokens_generated = 0;  // by every source
  double backpressure_s = 0;     // the scorer blocked on a full rollout queue
  double score_block_s = 0;      // producers blocked on a full scorer queue
  double admission_wait_s = 0;   // producers held back because new work would be trained too stale
  int64_t sources = 1;
  int64_t queue_capacity = 1;    // the rollout queue's, in groups
};

struct Verdict {
  std::string verdict;  // "trainer-bound" | "generation-bound" | "balanced"
  std::string advice;
};

// The verdict from a step's metrics (trainer_idle_frac, generation_idle_frac) and how full the
// rollout queue was on average (0..1).
Verdict throughput_verdict(const std::map<std::string, double>& m, double queue_fill);

// perf/mfu_fwd_bwd and perf/mfu_wall_clock (MFU over compute time and over wall time;
// docs/formulas.md, "MFU"; the peak: docs/dashboard.md, "MFU"): the step's model FLOPs
// (perf/train_flops, core/model/flops.h) over perf/fwd_bwd_s and over perf/step_s, against
// `peak_flops` (FLOP/s). Nothing is added where a figure is missing or zero.
void add_mfu(std::map<std::string, double>& m, double peak_flops);

class ThroughputAdvisor {
public:
  ThroughputAdvisor();
  // Paused time is not step time: the next step's window starts now.
  void restart_window();
  // Adds the window's perf/step_s, rollout/generated_tok_s, trainer_idle_frac (from
  // perf/rollout_wait_s in `m`), generation_idle_frac and scorer_idle_frac to `m`, starts the next
  // window, and returns the verdict.
  Verdict close_window(std::map<std::string, double>& m, const PipelineCounters& now);

private:
  std::chrono::steady_clock::time_point window_start_;
  PipelineCounters before_;
};

}  // namespace grpo::run
