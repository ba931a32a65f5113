#include "core/records/charts.h"

#include <cmath>

#include "core/records/catalogue.h"

namespace grpo::run {
namespace {

ChartLine line(std::string key, std::string label, bool dashed = false) {
  ChartLine l;
  l.key = std::move(key);
  l.label = std::move(label);
  l.dashed = dashed;
  return l;
}

ChartLine banded(std::string key, std::string label, std::string std_key) {
  ChartLine l = line(std::move(key), std::move(label));
  l.band_std = std::move(std_key);
  return l;
}

ChartLine pattern(std::string prefix, std::string suffix) {
  ChartLine l;
  l.key = std::move(prefix);
  l.suffix = std::move(suffix);
  return l;
}

ChartLine points(std::string key, std::string label) {
  ChartLine l = line(std::move(key), std::move(label));
  l.points = true;
  return l;
}

std::vector<ChartSpec> make_catalogue() {
  return {
      {"reward", "Reward", "", {banded("reward", "mean", "reward_std")}},
      {"reward_funcs", "Reward per function", "", {pattern("rewards/", "/mean")}},
      {"eval", "Eval accuracy", "", {points("eval/accuracy", "greedy accuracy")}},
      {"staleness", "Staleness (versions)", "versions",
       {line("sample/staleness_mean", "mean"), line("sample/staleness_max", "max"),
        line("sample/dropped_stale_total", "dropped", true)}},
      {"throughput", "Throughput (tok/s)", "tok/s",
       {line("rollout/generated_tok_s", "generated"), line("trained_tok_s", "trained")}},
      {"queue", "Rollout queue (groups)", "groups",
       {line("sample/rollout_queue_size", "occupancy"), line("rollout/score_queue_size", "scorer queue", true)}},
      {"waits", "Waits (s per step)", "s",
       {line("perf/rollout_wait_s", "trainer waits for rollouts"), line("rollout/backpressure_s", "back-pressure")}},
      {"idle", "Idle (fraction)", "fraction",
       {line("trainer_idle_frac", "trainer idle"), line("generation_idle_frac", "generation blocked")}},
      {"step_time", "Step time (s)", "s",
       {line("perf/step_s", "step"), line("perf/fwd_bwd_s", "forward+backward"), line("perf/optimizer_s", "optimizer")}},
      {"mfu", "MFU", "fraction", {line("perf/mfu_wall_clock", "wall clock"), line("perf/mfu_fwd_bwd", "fwd+bwd")}},
      {"loss", "Loss", "", {line("loss", "loss")}},
      {"kl", "KL", "", {line("kl", "kl")}},
      {"clip", "Ratio and clipping", "",
       {line("ratio_min", "ratio min"), line("ratio_max", "ratio max"), line("clip_ratio/low_mean", "clip low", true),
        line("clip_ratio/high_mean", "clip high", true), line("clip_ratio/region_mean", "clip fraction", true)}},
      {"entropy", "Entropy (nats)", "nats",
       {line("entropy", "mean token entropy"), line("entropy_coef", "bonus coefficient", true),
        line("entropy_mask/frac_trained", "top-entropy tokens trained", true)}},
      {"off_policy", "Off-policy correction", "",
       {line("sampling/importance_sampling_ratio/mean", "IS weight mean"),
        line("sampling/importance_sampling_ratio/min", "IS weight min"),
        line("sampling/importance_sampling_ratio/max", "IS weight max"),
        line("sampling/sampling_logp_difference/mean", "trainer-sampler gap", true),
        line("sampling/importance_sampling_ratio/frac_masked", "masked", true),
        line("sampling/importance_sampling_ratio/frac_truncated", "truncated", true),
        line("off_policy_mask/frac_dropped", "sequences dropped (OPSM)", true)}},
      {"length", "Completion length (tokens)", "tokens",
       {line("completions/mean_length", "mean"), line("completions/min_length", "min", true),
        line("completions/max_length", "max", true)}},
      {"lr", "Learning rate", "", {line("learning_rate", "lr")}},
  };
}

}  // namespace

const std::vector<ChartSpec>& chart_catalogue() {
  static const std::vector<ChartSpec> charts = make_catalogue();
  return charts;
}

nlohmann::json chart_catalogue_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : chart_catalogue()) {
    nlohmann::json lines = nlohmann::json::array();
    for (const auto& l : c.lines)
      lines.push_back({{"key", l.key}, {"label", l.label}, {"suffix", l.suffix}, {"band_std", l.band_std},
                       {"dashed", l.dashed}, {"points", l.points}});
    out.push_back({{"id", c.id}, {"title", c.title}, {"unit", c.unit}, {"help", chart_help(c)}, {"lines", std::move(lines)}});
  }
  return out;
}

std::string chart_help(const ChartSpec& chart) {
  std::string out;
  for (const auto& l : chart.lines) {
    // A pattern line stands for every metric it matches: its catalogue entry is the pattern's.
    const MetricSpec* m = find_metric(l.suffix.empty() ? l.key : l.key + "<f>" + l.suffix);
    if (!m) continue;
    if (!out.empty()) out += "\n";
    out += (l.label.empty() ? l.key + "<f>" + l.suffix : l.label) + ": " + m->doc;
    if (!m->unit.empty()) out += " [" + m->unit + "]";
  }
  return out;
}

const ChartSpec* find_chart(const std::string& id) {
  for (const auto& c : chart_catalogue())
    if (c.id == id) return &c;
  return nullptr;
}

std::map<std::string, double> derived_metrics(const std::map<std::string, double>& record) {
  std::map<std::string, double> out;
  const auto trained = record.find("batch/trained_tokens_per_step"), step_s = record.find("perf/step_s");
  if (trained != record.end() && step_s != record.end() && std::isfinite(trained->second) &&
      std::isfinite(step_s->second) && step_s->second > 0)
    out["trained_tok_s"] = trained->second / step_s->second;
  return out;
}

}  // namespace grpo::run
