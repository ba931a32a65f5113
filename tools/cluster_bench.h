// Benchmarks with real `grpo worker` processes on loopback (issue 5 §7; BENCHMARKS.md):
//  - `grpo bench cluster`:
//    straggler: an async run (an in-process Engine, no local rollouts) with W workers, healthy and
//      with one worker slowed `slowdown` x by an injected per-request delay (`grpo worker
//      --inject-delay-ms`); optimizer steps per minute of both, and the same pair in sync mode
//      (generation of step s+1's rollouts starts only once step s is trained and its adapter is
//      loaded on the workers, which is what `grpo train --sync` does in-process);
//    adapters: publish a new adapter version into the bucket plus the router's all-or-nothing load
//      on every worker, p50/p95 over repeats, per LoRA rank;
//    scaling: completions per second through the router with 1..W workers.
//  - LocalWorker: one `grpo worker` child process (stdout/stderr to files, so a busy trainer never
//    blocks it on a full pipe); also used by `grpo bench soak` (soak_bench.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config.h"

class QProcess;

namespace grpo::run {

struct LocalWorkerOptions {
  std::string program;        // the `grpo` executable
  std::string model_dir;
  std::string bucket;         // --bucket
  std::string token_file;
  std::string log_dir;        // <name>.out / <name>.err land here
  std::string name;
  int port = 0;               // 0: any free port (the first start); restarts reuse the port
  int threads = 1;            // --threads
  int inject_delay_ms = 0;    // --inject-delay-ms
};

class LocalWorker {
public:
  explicit LocalWorker(LocalWorkerOptions options);
  ~LocalWorker();  // kill()
  // Starts the process and waits (at most `timeout_s`) for its "listening on URL" line; throws
  // grpo::Error with the tail of its log when it exits or stays silent. A restart keeps the port.
  void start(double timeout_s = 120);
  void kill();     // SIGKILL and reap; no-op when not running
  bool running() const;
  int64_t pid() const;
  const std::string& url() const { return url_; }
  const std::string& name() const { return opts_.name; }

private:
  LocalWorkerOptions opts_;
  std::unique_ptr<QProcess> p_;
  std::string url_;
  int starts_ = 0;
};

// W LocalWorkers sharing one bucket and token file (created here); worker i is slowed by
// `delays_ms[i]` when given.
std::vector<std::unique_ptr<LocalWorker>> start_local_workers(const LocalWorkerOptions& common, int count,
                                                              const std::vector<int>& delays_ms = {});
std::vector<std::string> worker_urls(const std::vector<std::unique_ptr<LocalWorker>>& workers);

// Checks a "remote_accounting" event's accounting (RemoteAccounting::to_json()): every dispatch
// ended once, every request answered or abandoned, no group delivered twice, every completion
// the router answered delivered or discarded. Returns "" when it holds, else what failed.
std::string accounting_violation(const nlohmann::json& accounting);

// The run config of a benchmark run whose rollouts all come from `urls` (no local generators):
// the arithmetic task on the demo model, no checkpoints or evals, an adapter every step.
struct WorkerRunSettings {
  std::string model_dir;
  std::vector<std::string> urls;
  std::string token_file;
  int64_t steps = 16, prompts_per_step = 4, num_generations = 8, max_completion_length = 16;
  int64_t max_staleness = 2;
  std::string routing = "group";  // worker_routing
};
grpo::TrainConfig worker_run_config(const WorkerRunSettings& settings, const std::string& run_dir);

// A finished (or stopped) run's figures from its metrics and events files: steps,
// steps_per_min (after `warmup_steps`), completions_per_s (trained), rollout_s_mean,
// dropped_stale_total, the sources' accounting summed, samples_lost (router answers that reached
// neither the trainer nor a discarded batch, plus unbalanced dispatches), in_queues_at_end
// (delivered - trained - dropped; between 0 and the queues' capacity), and
// accounting_violations (strings; empty when everything adds up).
nlohmann::json summarize_worker_run(const std::string& run_dir, int64_t warmup_steps);

// Resident memory in bytes of this process, or of process `pid` (VmRSS in /proc/.../status; 0
// where unavailable).
int64_t resident_bytes(int64_t pid = 0);

struct ClusterBenchOptions {
  std::string program;              // the grpo executable (for `grpo worker`)
  std::string model_dir;            // the demo model (tiny-arith)
  std::vector<std::string> parts = {"straggler", "adapters", "scaling"};
  int workers = 3;
  int threads = 1;                  // torch threads per worker
  int64_t steps = 16;               // optimizer steps per straggler run
  int rounds = 1;                   // straggler: the four runs this many times over (medians)
  int64_t prompts_per_step = 4;
  int64_t num_generations = 8;
  int64_t max_completion_length = 16;
  int64_t max_staleness = 2;        // async runs (the run's default is 4; 2 keeps the history comparable)
  std::string routing = "group";    // worker_routing of every run: "group" or "prefix" (the reference's rules)
  double slowdown = 10;             // the straggler's per-request latency / a healthy one's
  int delay_ms = 0;                 // > 0: this injected delay instead of one derived from slowdown
  std::string sources = "router";   // "router": one source over all workers (as grpo train);
                                    // "per-worker": one source (producer thread) per worker
  std::vector<int64_t> ranks = {1, 8, 64};
  int repeats = 10;                 // adapter publications per rank
  int64_t scaling_requests = 64;    // completions per round (scaling)
  int scaling_rounds = 3;
};
nlohmann::json bench_cluster(const ClusterBenchOptions& options);

// `grpo bench soak`: one async run (the router over `workers` local workers, no local rollouts)
// for `minutes`, while a seeded random schedule SIGKILLs a worker every kill_min_s..kill_max_s
// (never the last one up) and restarts it on its port down_min_s..down_max_s later. Reports
// steps, samples, kills survived, samples lost (from the accounting; must be 0), and this
// process's resident memory every sample_s, with its growth from the end of warm-up
// (warmup_frac of the duration) to the end.
struct SoakBenchOptions {
  std::string program;
  std::string model_dir;
  double minutes = 30;
  int workers = 3;
  int threads = 1;
  uint64_t seed = 1;
  double kill_min_s = 15, kill_max_s = 45;
  double down_min_s = 1, down_max_s = 8;
  double sample_s = 10;
  double warmup_frac = 0.2;
  double flat_tolerance = 0.10;     // RSS growth after warm-up still called flat
  int64_t prompts_per_step = 4, num_generations = 8, max_completion_length = 16;
};
nlohmann::json bench_soak(const SoakBenchOptions& options);

}  // namespace grpo::run
