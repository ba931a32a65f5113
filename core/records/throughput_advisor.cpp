#include "core/records/throughput_advisor.h"

#include <algorithm>

namespace grpo::run {

Verdict throughput_verdict(const std::map<std::string, double>& m, double queue_fill) {
  auto get = [&](const char* k) { auto it = m.find(k); return it == m.end() ? 0.0 : it->second; };
  const double trainer_idle = get("trainer_idle_frac"), generation_idle = get("generation_idle_frac");
  if (trainer_idle < 0.05 && (queue_fill > 0.8 || generation_idle > 0.2))
    return {"trainer-bound", "generation waits on the trainer (a full queue, or admission: more would be trained too "
                             "stale): speed up training (larger token_budget, no gradient checkpointing, a faster "
                             "device) or spend less on generation (fewer local generators)"};
  if (trainer_idle > 0.2 && generation_idle < 0.05)
    return {"generation-bound", "the trainer waits for rollouts: add workers, lower max_completion_length or "
                                "num_generations, or raise max_staleness and max_inflight_tasks"};
  return {"balanced", "generation and training keep pace"};
}

void add_mfu(std::map<std::string, double>& m, double peak_flops) {
  auto get = [&](const char* k) { auto it = m.find(k); return it == m.end() ? 0.0 : it->second; };
  const double flops = get("perf/train_flops");
  if (!(flops > 0) || !(peak_flops > 0)) return;
  if (const double s = get("perf/fwd_bwd_s"); s > 0) m["perf/mfu_fwd_bwd"] = flops / s / peak_flops;
  if (const double s = get("perf/step_s"); s > 0) m["perf/mfu_wall_clock"] = flops / s / peak_flops;
}

ThroughputAdvisor::ThroughputAdvisor() : window_start_(std::chrono::steady_clock::now()) {}

void ThroughputAdvisor::restart_window() { window_start_ = std::chrono::steady_clock::now(); }

Verdict ThroughputAdvisor::close_window(std::map<std::string, double>& m, const PipelineCounters& now) {
  const auto end = std::chrono::steady_clock::now();
  const double step_s = std::chrono::duration<double>(end - window_start_).count();
  window_start_ = end;
  const double bp = now.backpressure_s - before_.backpressure_s;
  const double block = now.score_block_s - before_.score_block_s + now.admission_wait_s - before_.admission_wait_s;
  const double tokens = static_cast<double>(now.tokens_generated - before_.tokens_generated);
  before_ = now;
  m["rollout/generated_tok_s"] = step_s > 0 ? tokens / step_s : 0.0;
  m["perf/step_s"] = step_s;
  m["trainer_idle_frac"] = step_s > 0 ? m["perf/rollout_wait_s"] / step_s : 0.0;
  // Producers blocked on a full pipeline, or held back by admission (the scorer's own back-pressure
  // is what blocks them, so it is not added again).
  m["generation_idle_frac"] =
      step_s > 0 ? std::min(1.0, block / step_s / static_cast<double>(std::max<int64_t>(1, now.sources))) : 0.0;
  m["scorer_idle_frac"] = step_s > 0 ? std::min(1.0, bp / step_s) : 0.0;
  const double fill = m["sample/rollout_queue_size"] / static_cast<double>(std::max<int64_t>(1, now.queue_capacity));
  return throughput_verdict(m, fill);
}

}  // namespace grpo::run
