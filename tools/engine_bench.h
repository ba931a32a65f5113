// Benchmarks of the run layer:
//  - `grpo bench async`: the async engine against the synchronous loop on the same model, task
//    and step count, in one run: wall time to N steps, the trainer's idle fraction (time waiting
//    for rollouts over step time) and generation's idle fraction (time blocked on full queues,
//    or, in the sync loop, time spent training, over wall time).
//  - `grpo bench weight-sync`: publication cost of one adapter version (save + SHA256SUMS +
//    atomic rename) and its bytes for several LoRA ranks, against the full model's size.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::run {

struct AsyncBenchOptions {
  std::string model_dir;        // a model with a tokenizer (the demo model)
  std::string size;             // "" = model_dir as is; "25m" = a random ~25M model with its tokenizer
  int64_t steps = 12;
  int generators = 1;
  int64_t max_completion_length = 16;
};
nlohmann::json bench_async(const AsyncBenchOptions& options);

// A random model of `size` ("tiny", "25m", "100m": model::bench_model_config) with the tokenizer of
// `model_dir`, written to `out_dir` in Hugging Face format (`grpo bench make-model`): the larger
// models the benchmarks and the measurements of docs/ and BENCHMARKS.md train, export and push.
// Seeded: the same bytes every time. Returns out_dir.
std::string write_bench_model(const std::string& model_dir, const std::string& size, const std::string& out_dir);

// `grpo bench learn`: `grpo train --demo` (the async engine on the demo preset) from the base
// model's greedy eval accuracy until eval accuracy reaches `target`, timed on the wall clock
// (evaluations included), once per seed (`seeds` runs from `seed`, or the preset's; data_seed stays
// the preset's, so every run has the same problems and eval set). Each run's
// keys: seed, time_to_learn_s (null if never reached), samples_to_target and steps_to_target
// (completions and optimizer steps until then), base_accuracy, final_accuracy, steps, curve
// [[step, seconds, accuracy], ...], profile (learn_profile). Over the runs: median_time_to_learn_s
// and median_samples_to_target (null when half the runs or more never reached the target).
struct LearnBenchOptions {
  std::string preset;           // resources/presets/demo.yaml
  std::string resources;        // its model_name_or_path is relative to this
  double target = 0.85;
  int64_t max_steps = 0;        // 0 = the preset's
  int64_t eval_steps = 0;       // 0 = the preset's
  int64_t seed = -1;            // -1 = the preset's
  int64_t seeds = 1;            // runs, with seeds seed, seed + 1, ...
};

// Where a run's wall time went, from its metrics lines up to `last_step`: the trainer's phases
// summed over the steps (perf/fwd_bwd_s, perf/optimizer_s, perf/rollout_wait_s,
// perf/weight_sync_s, perf/eval_s) and "other" (the rest of `wall_s`: assembling, logging,
// checkpoints, start-up), each in seconds and as a share of wall_s; samples (batch/samples_per_step
// summed over the steps that took a fresh batch: with num_iterations > 1 the samples generated,
// not those trained) and steps. {"wall_s", "steps", "samples", "phases": [{"phase", "seconds", "share"}]}.
nlohmann::json learn_profile(const std::vector<nlohmann::json>& metrics, int64_t last_step, double wall_s);
// The same as a Markdown table (`grpo bench learn --profile`).
std::string learn_profile_table(const nlohmann::json& profile);
nlohmann::json bench_learn(const LearnBenchOptions& options);

struct WeightSyncBenchOptions {
  std::string model_dir;
  std::string size;             // as above
  std::vector<int64_t> ranks = {1, 8, 64};
  int repeats = 5;
};
nlohmann::json bench_weight_sync(const WeightSyncBenchOptions& options);

}  // namespace grpo::run
