// `grpo bench async` and `grpo bench weight-sync`: benchmarks of the run layer (need core/run).
#include <CLI/CLI.hpp>

#include <memory>

#include "app/commands.h"
#include "tools/engine_bench.h"

namespace grpo::cli {

void add_run_bench_commands(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");

  auto a = std::make_shared<run::AsyncBenchOptions>();
  auto* async = bench->add_subcommand("async", "Async engine vs the synchronous loop: wall time and idle fractions");
  async->add_option("--model", a->model_dir, "Model directory with a tokenizer (default: the demo model)")
      ->transform(model_path_transform());
  async->add_option("--size", a->size, "Use a random model of this size (e.g. 25m) with that tokenizer");
  async->add_option("--steps", a->steps, "Optimizer steps per mode");
  async->add_option("--generators", a->generators, "In-process generator threads (async)");
  async->add_option("--max-completion-length", a->max_completion_length, "Tokens per completion");
  async->callback([a] {
    if (a->model_dir.empty()) a->model_dir = resources_dir() + "/models/tiny-arith";
    print_json_line(run::bench_async(*a).dump());
  });

  auto l = std::make_shared<run::LearnBenchOptions>();
  auto* learn = bench->add_subcommand("learn", "Time for grpo train --demo to reach the target eval accuracy");
  learn->add_option("--preset", l->preset, "Run config (default: resources/presets/demo.yaml)");
  learn->add_option("--target", l->target, "Eval accuracy to reach");
  learn->add_option("--max-steps", l->max_steps, "Give up after this many steps (default: the preset's)");
  learn->add_option("--eval-steps", l->eval_steps, "Evaluate every N steps (default: the preset's)");
  learn->callback([l] {
    l->resources = resources_dir();
    if (l->preset.empty()) l->preset = l->resources + "/presets/demo.yaml";
    print_json_line(run::bench_learn(*l).dump());
  });

  auto w = std::make_shared<run::WeightSyncBenchOptions>();
  auto* sync = bench->add_subcommand("weight-sync", "Adapter publication time and bytes per version for LoRA ranks");
  sync->add_option("--model", w->model_dir, "Model directory (default: the demo model)")
      ->transform(model_path_transform());
  sync->add_option("--size", w->size, "Use a random model of this size (e.g. 25m)");
  sync->add_option("--ranks", w->ranks, "LoRA ranks");
  sync->add_option("--repeats", w->repeats, "Publications per rank (median reported)");
  sync->callback([w] {
    if (w->model_dir.empty()) w->model_dir = resources_dir() + "/models/tiny-arith";
    print_json_line(run::bench_weight_sync(*w).dump());
  });
}

}  // namespace grpo::cli
