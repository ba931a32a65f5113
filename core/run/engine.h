// Engine: the asynchronous GRPO run (docs/ARCHITECTURE.md, "The threads of a run"). Its
// RolloutPipeline (producers, the scorer, the bounded queues and the staleness filter) generates
// while the trainer loop here (the caller's thread) assembles each step from scored groups
// (StepAssembler), trains, publishes a new adapter version into the bucket every weight_sync_steps,
// evaluates, logs (StepLogger) and checkpoints. Generation and training never wait for each other
// except through the bounded queues (back-pressure). Control (pause, resume, stop, retune) is
// thread-safe and takes effect at the next step boundary.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config.h"
#include "core/grpo/trainer.h"
#include "core/records/engine_types.h"
#include "core/records/run_dir.h"
#include "core/rollout/dataset_sampler.h"
#include "core/rollout/reward.h"
#include "core/run/policy.h"
#include "core/run/rollout_pipeline.h"
#include "core/run/step_assembler.h"
#include "core/run/rollout_source.h"
#include "core/run/run_setup.h"
#include "core/run/worker_fleet.h"
#include "core/serve/run_control.h"

namespace grpo::run {

class RemoteSource;
class HubPusher;

struct EngineOptions {
  int local_generators = 1;  // in-process rollout sources sharing the base weights
  bool resume = false;       // continue from the newest intact checkpoint of the run directory
  // Test seam: called by producers before each generation (e.g. to inject delays).
  std::function<void(const std::string& source)> before_generate;
  // Called with every event as it happens (the run's events file gets it too, later if the bucket is full).
  std::function<void(const nlohmann::json& event)> on_event;
  // push_to_hub: the wait before a failed push is tried again (x4 each time; core/run/hub_pusher.h).
  int hub_retry_base_ms = 2000;
};

class Engine : public RunControl {
public:
  Engine(grpo::TrainConfig cfg, const std::string& run_dir, EngineOptions options = {});
  ~Engine();

  // Adds a rollout source (before run()).
  void add_source(std::unique_ptr<RolloutSource> source);
  // Runs until max_steps or stop(); returns the final adapter directory. Call once.
  std::string run(const std::function<void(const StepReport&)>& on_step = {});

  // ---- control, from any thread (RunControl, core/serve/run_control.h) ----
  void pause() override;
  void resume() override;
  void stop() override;
  // Validates `changes` now (an error string names the key and the reason; nothing changes),
  // and applies them at the next step boundary. Returns "" when accepted.
  std::string retune(const nlohmann::json& changes) override;

  // ---- workers (RunControl; engine_workers.cpp, docs/workers.md "Workers on Slurm") ----
  bool join_worker(const JoinRequest& request) override;
  void leave_worker(const std::string& url) override;
  std::string launch_workers(int count, const nlohmann::json& overrides) override;
  void cancel_workers(const std::string& job) override;
  // Where Slurm-launched workers join: the run endpoint's public URL (or slurm_trainer_url, which
  // wins). Before run(); a run with slurm_workers and no such URL fails at start, saying so.
  void set_join_url(const std::string& url);

  // Greedy accuracy of the trainer's current weights on up to `limit` eval examples (0: the
  // config's eval_size, or all); NaN without an eval split. Trainer thread, or before run().
  double evaluate(int64_t limit = 0);

  EngineState state() const override { return state_.load(); }
  int64_t step() const override { return step_.load(); }
  int64_t policy_version() const override { return version_.load(); }
  std::string run_dir() const override { return dir_.root(); }
  // The remote sources' workers (RemoteSource::workers()); none for local generators.
  std::vector<WorkerInfo> workers() const override;
  nlohmann::json config_schema() const override;  // the TRL key table the retunes are checked on
  // Scored groups waiting for the trainer in the rollout queue (0 before run()). Any thread.
  int64_t queued_groups() const;
  const grpo::TrainConfig& config() const { return *run_.config; }  // trainer thread only
  RunDirectory& run_directory() { return dir_; }
  // The events a full bucket holds back and the events file's size (RunControl::held_events).
  HeldEvents held_events() override;
  // Fixed once run() starts; for views such as RemoteSource::workers() (EngineSession).
  const std::vector<std::unique_ptr<RolloutSource>>& sources() const { return sources_; }

private:
  void start_pipeline();
  bool hold_if_paused();  // at a step boundary; true when it held
  void apply_pending_retunes(int64_t step);
  // `pass` counts the steps already taken on `assembled` (num_iterations reuses a batch).
  StepReport train_step(int64_t step, AssembledStep& assembled, int64_t pass, std::map<std::string, double> m,
                        ThroughputAdvisor& advisor, bool& unpublished);
  std::string finish_run(const std::string& failure, bool unpublished);
  void publish_version();
  std::string save_checkpoint_now();  // returns its folder
  void event(nlohmann::json e);
  // Runs one write into the bucket; while the file system refuses it (full, quota, file size,
  // I/O error) the run pauses here and retries with backoff (engine.cpp). `what` names it.
  void bucket_write(const std::string& what, const std::function<void()>& write);
  int64_t restore_from_checkpoint();  // returns the next group id to hand out
  // Slurm-launched workers (engine_workers.cpp): orphans of a killed trainer cancelled, the first
  // job submitted (run() start), every job cancelled (finish_run).
  RemoteSource* remote() const;
  std::shared_ptr<WorkerFleet> make_fleet(int count);
  void start_fleet();
  void stop_fleet();

  EngineOptions opts_;
  RunDirectory dir_;
  RunSetup run_;                       // config, policy, trainer, examples, rewards (core/run/run_setup.h)
  std::vector<std::unique_ptr<RolloutSource>> sources_;
  std::unique_ptr<HubPusher> hub_;     // push_to_hub (core/run/hub_pusher.h); null when off
  std::unique_ptr<RolloutPipeline> pipeline_;
  std::chrono::steady_clock::time_point started_;
  double peak_flops_ = 0;  // what perf/mfu_* divides by (start_pipeline)

  // Control, from any thread (guarded by mu_).
  mutable std::mutex mu_;
  std::mutex rewards_mu_;              // the RewardSet (scorer thread, eval, retuned weights)
  std::condition_variable control_cv_;
  // A retune accepted but not yet applied: the changes, checked against run_.config. The run's
  // config is run_.config alone (RunSetup): the trainer thread replaces that pointer, under mu_, at
  // a step boundary, and hands it to the trainer and the pipeline; nothing else holds a copy.
  nlohmann::json pending_retune_ = nlohmann::json::object();
  bool paused_ = false;

  std::atomic<bool> stopping_{false};
  std::atomic<int> stop_requests_{0};
  int stop_requests_at_end_ = -1;      // set when run() starts its final writes
  std::mutex events_mu_;
  std::deque<nlohmann::json> unwritten_events_;  // the events file refused them (bucket full): retried
  int64_t next_event_seq_ = 0;  // each event's identity, "seq" (docs/formats.md); guarded by events_mu_
  mutable std::mutex fleet_mu_;         // fleet_'s creation (run() or a launch) against its readers
  std::shared_ptr<WorkerFleet> fleet_;
  std::string join_url_;
  std::atomic<EngineState> state_{EngineState::Idle};
  std::atomic<int64_t> step_{0}, version_{0};
};

}  // namespace grpo::run
