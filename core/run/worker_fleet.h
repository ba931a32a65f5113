// WorkerFleet: the rollout workers a run asked a scheduler for, looked after for the whole run
// (docs/workers.md, "Workers on Slurm"). It submits them through a cluster::WorkerLauncher (Slurm's
// today: core/cluster/slurm.h), follows every task's state on its own thread (one poll every
// poll_s), turns each change into an event, hands a task that ended to the run (whose router
// then drops the worker) and asks for a replacement, up to max_resubmits over the run. Every job
// it submits is written to the run folder's record (slurm-jobs.json) before anything else
// happens, so stop() cancels all of them and the next trainer of the same run folder cancels what
// a killed one left behind (cancel_orphans). Torch-free, Qt-free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster/slurm.h"

namespace grpo::run {

struct WorkerFleetOptions {
  cluster::WorkerLaunch launch;  // what every job of the fleet runs and may use; count: the first job's
  int64_t max_resubmits = 3;     // replacements of ended tasks over the run
  double poll_s = 10;            // between looks at the jobs
  std::string record_file;       // the jobs this run owns (RunFolder's slurm-jobs.json)
  std::function<void(nlohmann::json)> on_event;
  // A task ended (failed, cancelled, timed out, preempted, completed, or gone from the scheduler):
  // its worker should leave the router. Called on the fleet's thread.
  std::function<void(const cluster::JobTask&)> on_task_ended;
};

class WorkerFleet {
public:
  WorkerFleet(std::shared_ptr<cluster::WorkerLauncher> launcher, WorkerFleetOptions options);
  ~WorkerFleet();  // stop()
  WorkerFleet(const WorkerFleet&) = delete;
  WorkerFleet& operator=(const WorkerFleet&) = delete;

  // Cancels the jobs that `record_file` lists and the scheduler still runs or queues (a trainer
  // of this run was killed before it could), then empties the record. Returns the jobs cancelled.
  // Errors (no scheduler, a bad record) become a warning event; the run goes on.
  static std::vector<std::string> cancel_orphans(cluster::WorkerLauncher& launcher, const std::string& record_file,
                                                 const std::function<void(nlohmann::json)>& on_event);

  // Submits the first job (launch.count workers) and starts watching. Throws grpo::Error with the
  // scheduler's words when the job was refused (nothing is left running then).
  void start();
  // Starts watching without submitting (a run that launches its first workers later, add()).
  void watch();
  // Another job of `count` workers (1..1000), with `overrides` of the launch's fields (partition,
  // gres, cpus_per_task, mem, time_limit, account, qos). Returns its id. Any thread.
  std::string add(int count, const nlohmann::json& overrides = nlohmann::json::object());
  // Cancels one job of the fleet (its tasks are not replaced). Throws for a job it does not own.
  void cancel(const std::string& job);
  // Cancels every job and ends the watching thread; idempotent. After it no job of the fleet runs.
  void stop();
  // Every task the fleet knows of now, newest poll (pending ones first as the scheduler lists them).
  std::vector<cluster::JobTask> tasks() const;
  int64_t resubmits() const { return resubmits_.load(); }
  // Looks at the jobs now instead of at the next poll (tests, and the app's Refresh). Any thread.
  void poll_now();

private:
  void loop();
  void poll_once();
  void take_poll(const std::string& job, const std::vector<cluster::JobTask>& now, std::vector<cluster::JobTask>& ended);
  void task_ended(const cluster::JobTask& t);
  std::string submit(cluster::WorkerLaunch launch, const std::string& why);
  void write_record();  // under mu_
  void event(nlohmann::json e);

  std::shared_ptr<cluster::WorkerLauncher> launcher_;
  WorkerFleetOptions opts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> jobs_;                     // every job submitted, in order
  std::set<std::string> cancelled_;                   // cancelled on purpose: not replaced
  std::map<std::string, cluster::JobTask> tasks_;     // task id -> newest state
  std::set<std::string> ended_;                       // tasks already handed to on_task_ended
  std::set<std::string> finished_jobs_;               // jobs with nothing left to watch
  bool stopping_ = false, poll_requested_ = false;
  std::atomic<int64_t> resubmits_{0};
  std::mutex poll_mu_;                                // one poll at a time
  std::thread thread_;
};

}  // namespace grpo::run
