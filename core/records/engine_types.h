// Engine value types: plain structs copied across threads (engine thread -> GUI, CLI). No torch,
// no Qt, no pointers into the engine.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace grpo::run {

// One sampled completion as the run records it (its samples file; the Samples page).
struct SampleRecord {
  int64_t step = 0;
  int64_t policy_version = 0;  // the version it was sampled with
  int64_t group = 0;
  std::string prompt, completion, answer, finish_reason;
  double reward = 0, advantage = 0;  // reward NaN when no reward function scored it
  // Each reward function's own score (before weighting), in the config's order; NaN where the
  // function returned None.
  std::vector<std::pair<std::string, double>> rewards = {};
};

// One optimizer step's report: metrics with TRL names (already window-reduced).
struct StepReport {
  int64_t step = 0;
  int64_t max_steps = 0;
  double elapsed_s = 0;
  int64_t policy_version = 0;
  std::map<std::string, double> metrics;
  std::string verdict;  // "trainer-bound" | "generation-bound" | "balanced" (async engine)
  std::string advice;   // what the user should act on
  std::vector<SampleRecord> samples = {};  // a few of this step's completions (async engine)
};

// One rollout worker as the run's router sees it (the Workers page), copied out periodically.
struct WorkerInfo {
  std::string name;            // the name it announced (discovery), else host:port
  std::string url;
  std::string status;          // joining | up | out | draining | paused
  int64_t adapter_version = -1;  // newest policy-v<N> it holds; 0: the base model only; -1: unknown
  int64_t inflight = 0, completed = 0, dispatched = 0, affinity_hits = 0, tokens = 0;
  double tok_s = 0;            // completion tokens per second over the last snapshot interval
  double affinity = 0;         // affinity_hits / dispatched (0 before any dispatch)
  std::string last_error;
  // A worker launched through a scheduler (core/run/worker_fleet.h): its task ("123_4") and what the
  // scheduler says of it. A task that has not joined yet (pending) is a row with no url.
  std::string job, job_state, job_reason, job_node, job_time_left;
  bool operator==(const WorkerInfo&) const = default;
};

// An operator's command for one worker, sent down to the run's router (EngineSession::worker_command).
enum class WorkerAction { Add, Remove, Drain, Pause, Resume };

enum class EngineState { Idle, Running, Paused, Stopping, Finished, Failed };
const char* to_string(EngineState s);

}  // namespace grpo::run
