// `grpo bench cluster` and `grpo bench soak`: benchmarks with real `grpo worker` processes on
// loopback (core/run/cluster_bench.h). Both start this very executable as their workers.
#include <CLI/CLI.hpp>

#include <memory>

#include <QCoreApplication>

#include "app/commands.h"
#include "core/common/error.h"
#include "core/common/strings.h"
#include "tools/cluster_bench.h"

namespace grpo::cli {
namespace {

// Runs `body` with a QCoreApplication (the router's and QProcess's event loops want one); the
// workers are this executable.
template <typename Fn>
nlohmann::json with_qt(Fn body) {
  const auto qt = make_qt_application();
  return body(QCoreApplication::applicationFilePath().toStdString());
}

}  // namespace

void add_cluster_bench_commands(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");

  auto c = std::make_shared<run::ClusterBenchOptions>();
  auto parts = std::make_shared<std::string>("straggler,adapters,scaling");
  auto* cluster = bench->add_subcommand(
      "cluster", "Local grpo worker processes: straggler (async vs sync), adapter distribution, scaling");
  cluster->add_option("--model", c->model_dir, "Model directory (default: the demo model)")
      ->transform(model_path_transform());
  cluster->add_option("--parts", *parts, "Comma-separated: straggler, adapters, scaling")->capture_default_str();
  cluster->add_option("--workers", c->workers, "Local workers")->capture_default_str();
  cluster->add_option("--threads", c->threads, "Torch threads per worker")->capture_default_str();
  cluster->add_option("--steps", c->steps, "Optimizer steps per straggler run (4 runs)")->capture_default_str();
  cluster->add_option("--rounds", c->rounds, "Straggler: run the four runs this many times, in turn, and report medians")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cluster->add_option("--prompts-per-step", c->prompts_per_step, "Prompts per step")->capture_default_str();
  cluster->add_option("--num-generations", c->num_generations, "Completions per prompt")->capture_default_str();
  cluster->add_option("--max-completion-length", c->max_completion_length, "Tokens per completion")
      ->capture_default_str();
  cluster->add_option("--max-staleness", c->max_staleness, "max_staleness of the async runs")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cluster->add_option("--routing", c->routing, "worker_routing of every run: group (ours) or prefix (the reference proxy's rules)")
      ->check(CLI::IsMember({"group", "prefix"}))
      ->capture_default_str();
  cluster->add_option("--slowdown", c->slowdown, "The straggler's latency over a healthy batch's")->capture_default_str();
  cluster->add_option("--delay-ms", c->delay_ms, "Inject this delay instead (0: derived from --slowdown)");
  cluster->add_option("--sources", c->sources,
                      "Async rollout sources: router (one over all workers, as grpo train) or per-worker")
      ->capture_default_str();
  cluster->add_option("--ranks", c->ranks, "LoRA ranks (adapters)");
  cluster->add_option("--repeats", c->repeats, "Publications per rank (adapters)")->capture_default_str();
  cluster->add_option("--scaling-requests", c->scaling_requests, "Completions per round (scaling)")
      ->capture_default_str();
  cluster->add_option("--scaling-rounds", c->scaling_rounds, "Timed rounds per worker count (scaling)")
      ->capture_default_str();
  cluster->callback([c, parts] {
    if (c->model_dir.empty()) c->model_dir = resources_dir() + "/models/tiny-arith";
    c->parts = split(*parts, ',');
    print_json_line(with_qt([&](const std::string& program) {
                      c->program = program;
                      return run::bench_cluster(*c);
                    }).dump());
  });

  auto s = std::make_shared<run::SoakBenchOptions>();
  auto* soak = bench->add_subcommand(
      "soak", "A run with local workers SIGKILLed and restarted at random: samples lost (must be 0), memory");
  soak->add_option("--model", s->model_dir, "Model directory (default: the demo model)")
      ->transform(model_path_transform());
  soak->add_option("--minutes", s->minutes, "How long to run")->capture_default_str();
  soak->add_option("--workers", s->workers, "Local workers (one is always left up)")->capture_default_str();
  soak->add_option("--threads", s->threads, "Torch threads per worker")->capture_default_str();
  soak->add_option("--seed", s->seed, "Seed of the kill schedule")->capture_default_str();
  soak->add_option("--kill-min-s", s->kill_min_s, "Shortest time between kills")->capture_default_str();
  soak->add_option("--kill-max-s", s->kill_max_s, "Longest time between kills")->capture_default_str();
  soak->add_option("--down-min-s", s->down_min_s, "Shortest time a killed worker stays down")->capture_default_str();
  soak->add_option("--down-max-s", s->down_max_s, "Longest time a killed worker stays down")->capture_default_str();
  soak->add_option("--sample-s", s->sample_s, "Seconds between memory samples")->capture_default_str();
  soak->callback([s] {
    if (s->model_dir.empty()) s->model_dir = resources_dir() + "/models/tiny-arith";
    const auto r = with_qt([&](const std::string& program) {
      s->program = program;
      return run::bench_soak(*s);
    });
    print_json_line(r.dump());
    check(r["ok"].get<bool>(), "bench soak",
          "samples were lost or the accounting does not add up: " + r["accounting_violations"].dump());
  });
}

}  // namespace grpo::cli
