// `grpo bench async`, `learn`, `weight-sync` and `make-model`: benchmarks of the run layer (need core/run).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

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
  learn->add_option("--seed", l->seed, "Seed of the first run (default: the preset's)")->check(CLI::NonNegativeNumber);
  learn->add_option("--seeds", l->seeds, "Runs, with seeds seed, seed + 1, ...; the medians are reported")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  auto profile = std::make_shared<bool>(false);
  learn->add_flag("--profile", *profile, "Also print where each run's time went, as a table (stderr)");
  learn->callback([l, profile] {
    l->resources = resources_dir();
    if (l->preset.empty()) l->preset = l->resources + "/presets/demo.yaml";
    const auto result = run::bench_learn(*l);
    if (*profile)
      for (const auto& r : result.contains("runs") ? result["runs"] : nlohmann::json::array({result}))
        std::fprintf(stderr, "seed %lld:\n%s\n", static_cast<long long>(r["seed"].get<int64_t>()),
                     run::learn_profile_table(r["profile"]).c_str());
    print_json_line(result.dump());
  });

  struct MakeModelArgs { std::string model_dir, size = "25m", out; };
  auto mm = std::make_shared<MakeModelArgs>();
  auto* make = bench->add_subcommand("make-model", "Write a random model of a benchmark size, with a model's tokenizer, in Hugging Face format");
  make->add_option("--size", mm->size, "tiny, 25m or 100m")->check(CLI::IsMember({"tiny", "25m", "100m"}));
  make->add_option("--model", mm->model_dir, "Model directory whose tokenizer it takes (default: the demo model)")
      ->transform(model_path_transform());
  make->add_option("--output", mm->out, "The folder to write (created)")->required();
  make->callback([mm] {
    if (mm->model_dir.empty()) mm->model_dir = resources_dir() + "/models/tiny-arith";
    print_json_line(nlohmann::json{{"model", run::write_bench_model(mm->model_dir, mm->size, mm->out)}, {"size", mm->size}}.dump());
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
