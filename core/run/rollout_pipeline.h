// RolloutPipeline: the generation side of the async engine (docs/ARCHITECTURE.md, "The threads
// of a run"; staleness: docs/formulas.md, "Staleness"):
//
//   producers (one thread per RolloutSource) -> scorer queue (bounded) -> scorer thread
//     -> rollout queue (bounded, queue_maxsize samples) -> collect() on the trainer's thread
//
// Producers keep at most max_inflight_tasks samples out, and start a group only when it can still
// be trained within max_staleness versions (admission_limit_groups); each group's RNG stream
// depends on the seed and its group id only. The scorer scores one group at a time (score_groups). collect()
// drops groups more than max_staleness versions older than the trainer's and reports the
// window's intake metrics. Pause holds the producers; stop() closes the queues and wakes every
// thread. Thread-safe unless noted.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config.h"
#include "core/grpo/metrics.h"
#include "core/records/throughput_advisor.h"
#include "core/rollout/dataset_sampler.h"
#include "core/rollout/reward.h"
#include "core/run/bounded_queue.h"
#include "core/run/policy.h"
#include "core/run/rollout_source.h"
#include "core/run/step_assembler.h"

namespace grpo::run {

using Clock = std::chrono::steady_clock;

// A group on its way through the pipeline: scored, with its timestamps.
struct PipelineGroup : ScoredGroup {
  Clock::time_point created, generated, enqueued;
};

struct PipelineOptions {
  const Policy* policy = nullptr;
  rollout::DatasetStream* stream = nullptr;  // prompts, in order (guarded by the pipeline)
  rollout::RewardSet* rewards = nullptr;
  std::mutex* rewards_mutex = nullptr;       // shared with eval and reward_weights retunes
  int64_t next_group_id = 0;                 // restored from a checkpoint
  std::function<void(nlohmann::json)> event;                  // errors of sources
  std::function<void(const std::string& source)> before_generate;  // test seam
};

class RolloutPipeline {
public:
  // Shares the run's config object (core/grpo/config.h, SharedConfig).
  RolloutPipeline(grpo::SharedConfig cfg, PipelineOptions options);
  ~RolloutPipeline();  // stops and joins

  // Starts the scorer and a producer per source; `sources` must outlive the pipeline.
  void start(const std::vector<std::unique_ptr<RolloutSource>>& sources);
  void set_paused(bool paused);
  // The sampling settings producers and the scorer read (a retune changed them).
  void set_config(grpo::SharedConfig cfg);
  // The trainer's optimizer steps so far and the newest version it published (admission counts
  // the publishes ahead from them, and a source's lag behind that version).
  void set_trainer_step(int64_t steps_done, int64_t published_version);
  void stop();
  void join();

  // The trainer's intake: blocks until `want` groups at most max_staleness versions behind
  // `version` are taken (fewer only when stopping). Adds perf/rollout_wait_s,
  // sample/staleness_mean|max, sample/time_in_queue_s, sample/dropped_stale_total and
  // sample/rollout_queue_size to `m`. Trainer thread only.
  std::vector<std::shared_ptr<PipelineGroup>> collect(int64_t want, int64_t version, int64_t max_staleness,
                                                      std::map<std::string, double>& m);
  // The producers' and scorer's metrics since the last call (rollout/*), then cleared.
  void drain_window(std::map<std::string, double>& m);
  PipelineCounters counters() const;

  int64_t inflight_samples() const;
  // Groups started and not yet taken by collect() (in flight, being scored, queued), and the most
  // admission allows a source `lag` versions behind the newest (docs/formulas.md, "Admission").
  int64_t outstanding_groups() const;
  int64_t admission_limit_groups(int64_t lag = 0) const;
  int64_t epoch() const;  // passes over the training data so far
  size_t queued_groups() const { return rollout_queue_.size(); }
  int64_t dropped_stale_total() const { return dropped_stale_total_; }  // trainer thread
  // What a checkpoint records of the pipeline, taken together: the dataset cursor and the next group id.
  std::pair<nlohmann::json, int64_t> cursor() const;

private:
  void producer_loop(RolloutSource* source);
  void stream_loop(RolloutSource* source);  // producer_loop for sources that stream()
  void scorer_loop();
  std::shared_ptr<PipelineGroup> new_group_locked();
  int64_t inflight_limit_locked() const;
  int64_t admission_limit_locked(int64_t lag) const;
  bool admits_locked(int64_t groups, int64_t lag) const;
  int64_t lag_locked(std::optional<int64_t> sampling_version) const;
  void settle(int64_t groups);  // groups that leave the count: taken by collect(), failed, or stopped
  void note_admission_wait_locked(double seconds);  // a producer's time held back by admission

  PipelineOptions opts_;
  const int64_t G_;
  const int64_t seed_;
  const int64_t max_prompt_length_;
  const int64_t prompts_per_step_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // inflight room, pause and stop
  grpo::SharedConfig cfg_;      // the run's config: sampling settings (the pointer guarded by mu_)
  bool paused_ = false;
  std::atomic<bool> stopping_{false};
  int64_t inflight_samples_ = 0;
  int64_t next_group_id_ = 0;
  int64_t admitted_groups_ = 0, settled_groups_ = 0;  // started; taken by collect() or lost
  int64_t trainer_steps_ = 0, published_version_ = 0;
  double admission_wait_s_ = 0;  // cumulative
  grpo::MetricsWindow window_;
  double backpressure_s_ = 0, score_block_s_ = 0;  // cumulative
  BoundedQueue<std::shared_ptr<PipelineGroup>> score_queue_, rollout_queue_;
  std::vector<RolloutSource*> sources_;
  std::vector<std::thread> threads_;
  int64_t dropped_stale_total_ = 0;
};

}  // namespace grpo::run
