// WorkerFleet (worker_fleet.h): submit, watch, replace and cancel a run's scheduler-launched workers.
#include "core/run/worker_fleet.h"

#include <algorithm>
#include <chrono>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/json_fields.h"
#include "core/common/log.h"

namespace grpo::run {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxRecordBytes = 1 << 20;
constexpr size_t kMaxRecordJobs = 10000;

std::string job_of_task(const std::string& task) { return task.substr(0, task.find('_')); }
bool is_concrete(const std::string& task) { return task.find('[') == std::string::npos; }

// Some task still queued or running: the job is not over.
bool any_live(const std::vector<cluster::JobTask>& tasks) {
  return std::any_of(tasks.begin(), tasks.end(), [](const cluster::JobTask& t) { return !cluster::job_state_ended(t.state); });
}

// The jobs a record lists; throws grpo::Error naming the file when it is not one.
std::vector<std::string> read_record(const std::string& path) {
  if (!file_exists(path)) return {};
  const json j = json::parse(read_file(path, kMaxRecordBytes), nullptr, false);
  check(!j.is_discarded() && j.is_object(), path, "not a JSON object", "it is written by the trainer; delete it if damaged");
  const json* jobs = json_field(j, "jobs");
  check(jobs && jobs->is_array() && jobs->size() <= kMaxRecordJobs, path, "field \"jobs\": expected a list of job ids");
  std::vector<std::string> out;
  for (const auto& v : *jobs) {
    check(v.is_string() && cluster::is_job_id(v.get<std::string>()), path,
          "field \"jobs\": " + v.dump().substr(0, 40) + " is not a job id");
    out.push_back(v.get<std::string>());
  }
  return out;
}

void save_record(const std::string& path, const std::vector<std::string>& jobs) {
  if (path.empty()) return;
  write_file_atomic(path, json{{"scheduler", "slurm"}, {"jobs", jobs}}.dump(2) + "\n");
}

// What a user may change in another job of the fleet ("Add N more", POST /grpo/workers/launch).
void apply_overrides(cluster::WorkerLaunch& l, const json& o) {
  check(o.is_object(), "launch", "expected a JSON object of launch fields");
  for (const auto& [key, v] : o.items()) {
    const auto str = [&](std::string& field) {
      check(v.is_string(), "launch", "field \"" + key + "\": expected a string");
      field = v.get<std::string>();
    };
    if (key == "partition") str(l.partition);
    else if (key == "gres") str(l.gres);
    else if (key == "mem") str(l.mem);
    else if (key == "time_limit") str(l.time_limit);
    else if (key == "account") str(l.account);
    else if (key == "qos") str(l.qos);
    else if (key == "cpus_per_task") {
      check(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 1024, "launch",
            "field \"cpus_per_task\": expected an integer from 0 to 1024");
      l.cpus_per_task = v.get<int>();
    } else {
      throw Error("launch", "unknown field \"" + key.substr(0, 64) + "\"",
                  "partition, gres, cpus_per_task, mem, time_limit, account or qos");
    }
  }
  cluster::check_worker_launch(l);
}

}  // namespace

WorkerFleet::WorkerFleet(std::shared_ptr<cluster::WorkerLauncher> launcher, WorkerFleetOptions options)
    : launcher_(std::move(launcher)), opts_(std::move(options)) {
  cluster::check_worker_launch(opts_.launch);
}

WorkerFleet::~WorkerFleet() {
  try {
    stop();
  } catch (const std::exception& e) {
    log_error(std::string("worker fleet: ") + e.what());
  }
}

void WorkerFleet::event(json e) {
  if (opts_.on_event) opts_.on_event(std::move(e));
}

std::vector<std::string> WorkerFleet::cancel_orphans(cluster::WorkerLauncher& launcher, const std::string& record_file,
                                                     const std::function<void(json)>& on_event) {
  std::vector<std::string> cancelled;
  std::string at;  // the job being looked at when an error came
  try {
    for (const auto& job : read_record(record_file)) {
      at = job;
      if (!any_live(launcher.poll(job))) continue;
      launcher.cancel(job);
      cancelled.push_back(job);
    }
    save_record(record_file, {});
  } catch (const Error& e) {
    if (on_event)
      on_event({{"event", "slurm_orphans_unchecked"}, {"error", e.what()}, {"jobs", at.empty() ? json::array() : json::array({at})},
                {"advice", "cancel them yourself with scancel if they still run (squeue --me); the record stays in " +
                               record_file}});
    return cancelled;
  }
  if (!cancelled.empty() && on_event) on_event({{"event", "slurm_orphans_cancelled"}, {"jobs", cancelled}});
  return cancelled;
}

std::string WorkerFleet::submit(cluster::WorkerLaunch launch, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    check(!stopping_, "slurm", "the run is stopping; no more workers are submitted");
  }
  const std::string job = launcher_->submit(launch);  // seconds at most (its own deadline); not under mu_
  bool stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(job);
    write_record();
    stopping = stopping_;
  }
  if (stopping) {  // stop() ran while sbatch did: the job is in the record, cancel it here too
    launcher_->cancel(job);
    return job;
  }
  event({{"event", "slurm_submitted"}, {"job", job}, {"count", launch.count}, {"why", why},
         {"partition", launch.partition}, {"gres", launch.gres}});
  return job;
}

void WorkerFleet::write_record() { save_record(opts_.record_file, jobs_); }

void WorkerFleet::start() {
  check(!thread_.joinable(), "slurm", "the fleet was started already");
  submit(opts_.launch, "start");
  watch();
}

void WorkerFleet::watch() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { loop(); });
}

std::string WorkerFleet::add(int count, const json& overrides) {
  cluster::WorkerLaunch l = opts_.launch;
  l.count = count;
  apply_overrides(l, overrides);
  const std::string job = submit(l, "added");
  poll_now();
  return job;
}

void WorkerFleet::cancel(const std::string& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    check(std::find(jobs_.begin(), jobs_.end(), job) != jobs_.end(), "slurm", "job \"" + job.substr(0, 40) + "\" is not one of this run's");
    cancelled_.insert(job);
  }
  launcher_->cancel(job);
  event({{"event", "slurm_cancelled"}, {"jobs", {job}}, {"why", "asked"}});
  poll_now();
}

void WorkerFleet::stop() {
  std::vector<std::string> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (const auto& j : jobs_)
      if (!finished_jobs_.count(j)) jobs.push_back(j);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<std::string> cancelled, kept;
  for (const auto& job : jobs) {
    try {
      launcher_->cancel(job);
      cancelled.push_back(job);
    } catch (const Error& e) {
      kept.push_back(job);
      event({{"event", "slurm_cancel_failed"}, {"job", job}, {"error", e.what()},
             {"advice", "cancel it yourself (scancel " + job + "); the next start of this run tries again"}});
    }
  }
  if (!cancelled.empty()) event({{"event", "slurm_cancelled"}, {"jobs", cancelled}, {"why", "the run ended"}});
  std::lock_guard<std::mutex> lock(mu_);
  jobs_ = kept;  // what a later start must still cancel
  write_record();
}

std::vector<cluster::JobTask> WorkerFleet::tasks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<cluster::JobTask> out;
  for (const auto& [id, t] : tasks_) out.push_back(t);
  return out;
}

void WorkerFleet::poll_now() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poll_requested_ = true;
  }
  cv_.notify_all();
}

void WorkerFleet::loop() {
  const auto period = std::chrono::duration<double>(opts_.poll_s);
  while (true) {
    try {
      poll_once();
    } catch (const std::exception& e) {  // a poll never ends the run
      log_error(std::string("worker fleet: ") + e.what());
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, period, [this] { return stopping_ || poll_requested_; });
    if (stopping_) return;
    poll_requested_ = false;
  }
}

void WorkerFleet::poll_once() {
  std::lock_guard<std::mutex> polling(poll_mu_);
  std::vector<std::string> jobs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& j : jobs_)
      if (!finished_jobs_.count(j)) jobs.push_back(j);
  }
  std::vector<cluster::JobTask> ended;
  for (const auto& job : jobs) {
    try {
      take_poll(job, launcher_->poll(job), ended);
    } catch (const Error& e) {
      event({{"event", "slurm_poll_failed"}, {"job", job}, {"error", e.what()},
             {"advice", "the scheduler did not answer; the run goes on and asks again"}});
    }
  }
  for (const auto& t : ended) task_ended(t);
}

// One job's tasks as the scheduler lists them now: an event for each change, and the tasks that
// ended since the last look added to `ended`.
void WorkerFleet::take_poll(const std::string& job, const std::vector<cluster::JobTask>& now,
                            std::vector<cluster::JobTask>& ended) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> seen;
  for (const auto& t : now) {
    seen.insert(t.id);
    auto it = tasks_.find(t.id);
    const bool changed = it == tasks_.end() || it->second.state != t.state || it->second.reason != t.reason ||
                         it->second.node != t.node;
    if (changed && !ended_.count(t.id))
      event({{"event", "slurm_job_state"}, {"job", t.id}, {"state", cluster::to_string(t.state)},
             {"scheduler_state", t.state_text}, {"reason", t.reason}, {"node", t.node}, {"time_left", t.time_left}});
    if (cluster::job_state_ended(t.state) && is_concrete(t.id) && ended_.insert(t.id).second) ended.push_back(t);
    tasks_[t.id] = t;
  }
  // Tasks of this job the scheduler no longer lists: pending ranges that split into tasks are
  // dropped; a task that was there and is gone has ended (the controller forgot it).
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (job_of_task(it->first) != job || seen.count(it->first)) {
      ++it;
    } else if (!is_concrete(it->first)) {
      it = tasks_.erase(it);
    } else {
      if (ended_.insert(it->first).second) {
        it->second.state = cluster::JobState::Other;
        it->second.state_text = "GONE";
        it->second.reason = "no longer listed by the scheduler";
        ended.push_back(it->second);
      }
      ++it;
    }
  }
  if (!any_live(now)) finished_jobs_.insert(job);
}

// A task that ended: its worker leaves the run, and a replacement is asked for unless the task
// was cancelled on purpose, the run is stopping, or the run's replacements are spent.
void WorkerFleet::task_ended(const cluster::JobTask& t) {
  bool on_purpose = false, stopping = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_purpose = cancelled_.count(job_of_task(t.id)) > 0;
    stopping = stopping_;
  }
  const bool failure = t.state != cluster::JobState::Completed && !on_purpose;
  event({{"event", "slurm_task_ended"}, {"job", t.id}, {"state", cluster::to_string(t.state)},
         {"scheduler_state", t.state_text}, {"reason", t.reason}, {"node", t.node},
         {"severity", failure ? "warning" : "info"}});
  if (opts_.on_task_ended) opts_.on_task_ended(t);
  if (on_purpose || stopping) return;
  if (resubmits_.load() >= opts_.max_resubmits) {
    event({{"event", "slurm_resubmit_limit"}, {"job", t.id}, {"resubmits", resubmits_.load()},
           {"advice", "the run goes on with the workers it has; raise slurm_max_resubmits or add workers "
                      "(the app's Workers page, or grpo workers launch)"}});
    return;
  }
  cluster::WorkerLaunch one = opts_.launch;
  one.count = 1;
  try {
    ++resubmits_;
    const std::string job = submit(one, "replaces " + t.id);
    event({{"event", "slurm_worker_replaced"}, {"ended", t.id}, {"state", cluster::to_string(t.state)}, {"job", job}});
  } catch (const Error& e) {
    event({{"event", "slurm_submit_failed"}, {"error", e.what()}, {"why", "replaces " + t.id},
           {"advice", "the run goes on with the workers it has"}});
  }
}

}  // namespace grpo::run
