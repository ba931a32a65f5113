// The engine's workers (engine.h, RunControl's worker calls): workers joining and leaving through
// the run's endpoint, and the workers the run launched through Slurm (WorkerFleet), from the
// orphans of a killed trainer to the last scancel. docs/workers.md, "Workers on Slurm".
#include <unistd.h>

#include <climits>
#include <filesystem>

#include "core/cluster/cluster_token.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/hub/hf_cache.h"
#include "core/run/engine.h"
#include "core/run/remote_source.h"

namespace grpo::run {
namespace {

std::string absolute(const std::string& p) { return std::filesystem::absolute(p).lexically_normal().string(); }

// This program's own path: what the nodes run unless slurm_worker_program says otherwise.
std::string own_program() {
  char buf[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  check(n > 0, "slurm_worker_program", "this program's path is unknown", "set slurm_worker_program to the grpo binary on the nodes");
  return std::string(buf, static_cast<size_t>(n));
}

// A launch's fields under their config keys, for errors.
const std::map<std::string, std::string>& launch_keys() {
  static const std::map<std::string, std::string> k = {
      {"count", "slurm_workers"}, {"partition", "slurm_partition"}, {"gres", "slurm_gres"},
      {"cpus_per_task", "slurm_cpus_per_task"}, {"mem", "slurm_mem"}, {"time_limit", "slurm_time_limit"},
      {"account", "slurm_account"}, {"qos", "slurm_qos"}, {"extra_options", "slurm_sbatch_options"},
      {"drain_before_s", "slurm_drain_s"}, {"command", "slurm_worker_args"}};
  return k;
}

}  // namespace

RemoteSource* Engine::remote() const {
  for (const auto& s : sources_)  // fixed from the constructor on
    if (auto* r = dynamic_cast<RemoteSource*>(s.get())) return r;
  return nullptr;
}

std::vector<WorkerInfo> Engine::workers() const {
  std::vector<WorkerInfo> out;
  if (auto* r = remote()) out = r->workers();
  std::vector<cluster::JobTask> tasks;
  {
    std::lock_guard<std::mutex> lock(fleet_mu_);
    if (fleet_) tasks = fleet_->tasks();
  }
  // Each launched task beside its worker; a task with no worker yet (queued, starting) as a row.
  for (const auto& t : tasks) {
    bool joined = false;
    for (auto& w : out) {
      if (w.job != t.id) continue;
      joined = true;
      w.job_state = cluster::to_string(t.state);
      w.job_reason = t.reason == "None" ? "" : t.reason;
      w.job_node = t.node;
      w.job_time_left = t.time_left;
    }
    if (joined || cluster::job_state_ended(t.state)) continue;
    WorkerInfo row;
    row.name = t.node.empty() ? t.id : t.node + " (" + t.id + ")";
    row.status = t.state == cluster::JobState::Pending ? "queued" : "launching";
    row.job = t.id;
    row.job_state = cluster::to_string(t.state);
    row.job_reason = t.reason == "None" ? "" : t.reason;
    row.job_node = t.node;
    row.job_time_left = t.time_left;
    out.push_back(std::move(row));
  }
  return out;
}

bool Engine::join_worker(const JoinRequest& request) {
  RemoteSource* r = remote();
  check(r != nullptr, "join", "this run takes no remote workers",
        "start it with worker_urls, discovery or slurm_workers");
  const bool first = r->join(request.url, request.name.empty() ? request.node : request.name, request.job);
  if (first)  // a repeated join (the worker's heartbeat) is not an event
    event({{"event", "worker_join"}, {"url", request.url}, {"name", request.name}, {"job", request.job},
           {"node", request.node}});
  return first;
}

void Engine::leave_worker(const std::string& url) {
  RemoteSource* r = remote();
  check(r != nullptr, "leave", "this run takes no remote workers");
  r->command(WorkerAction::Remove, url);
  event({{"event", "worker_leave"}, {"url", url}});
}

void Engine::set_join_url(const std::string& url) {
  std::lock_guard<std::mutex> lock(fleet_mu_);
  join_url_ = url;
}

std::shared_ptr<WorkerFleet> Engine::make_fleet(int count) {
  const grpo::TrainConfig& c = *run_.config;  // the launch fields are not retunable
  std::string join_url = c.slurm_trainer_url.empty() ? join_url_ : c.slurm_trainer_url;
  check(!join_url.empty(), "slurm_workers", "the workers join the run's endpoint, and this run is not served",
        "set serve: HOST:PORT (e.g. 0.0.0.0:0), or slurm_trainer_url when the workers reach the trainer another way");
  check(remote() != nullptr, "slurm_workers", "this run has no remote source for the workers to join",
        "set slurm_workers >= 1 in the run config");
  WorkerFleetOptions fo;
  cluster::WorkerLaunch& l = fo.launch;
  l.count = count;
  l.job_name = "grpo-worker";
  l.partition = c.slurm_partition;
  l.gres = c.slurm_gres;
  l.cpus_per_task = static_cast<int>(c.slurm_cpus_per_task);
  l.mem = c.slurm_mem;
  l.time_limit = c.slurm_time_limit;
  l.account = c.slurm_account;
  l.qos = c.slurm_qos;
  l.extra_options = c.slurm_sbatch_options;
  l.drain_before_s = static_cast<int>(c.slurm_drain_s);
  const std::string slurm_dir = absolute(dir_.slurm_dir());
  l.script_dir = slurm_dir;
  l.log_dir = slurm_dir + "/logs";
  // The token reaches the workers as a 0600 file beside the run's other files on the shared file
  // system: never on a command line, never in the job's environment.
  std::filesystem::create_directories(slurm_dir);
  const std::string token_copy = slurm_dir + "/cluster-token";
  write_file_atomic(token_copy, cluster::load_or_create_token(c.cluster_token_file.empty() ? cluster::default_token_path()
                                                                                             : c.cluster_token_file) + "\n");
  std::filesystem::permissions(token_copy, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace);
  l.command = {c.slurm_worker_program.empty() ? own_program() : c.slurm_worker_program,
               "worker",
               "--model", absolute(hub::resolve_model_dir(c.model_name_or_path, c.model_revision)),
               "--listen", c.slurm_worker_listen,
               "--token-file", token_copy,
               "--bucket", absolute(dir_.root()),
               "--join", join_url};
  l.command.insert(l.command.end(), c.slurm_worker_args.begin(), c.slurm_worker_args.end());
  cluster::check_worker_launch(l, launch_keys());
  fo.max_resubmits = c.slurm_max_resubmits;
  fo.poll_s = c.slurm_poll_s;
  fo.record_file = dir_.slurm_jobs_path();
  fo.on_event = [this](nlohmann::json e) { event(std::move(e)); };
  fo.on_task_ended = [this](const cluster::JobTask& t) {
    if (auto* r = remote())
      for (const auto& url : r->urls_of_job(t.id)) r->command(WorkerAction::Remove, url);
  };
  cluster::SlurmOptions so;
  so.bin_dir = c.slurm_bin_dir;
  return std::make_shared<WorkerFleet>(std::make_shared<cluster::SlurmLauncher>(so), std::move(fo));
}

void Engine::start_fleet() {
  const grpo::TrainConfig& c = *run_.config;
  // A trainer of this run that was killed left its jobs running: they go first, whatever this
  // start asks for.
  if (file_exists(dir_.slurm_jobs_path())) {
    cluster::SlurmOptions so;
    so.bin_dir = c.slurm_bin_dir;
    cluster::SlurmLauncher launcher(so);
    WorkerFleet::cancel_orphans(launcher, dir_.slurm_jobs_path(), [this](nlohmann::json e) { event(std::move(e)); });
  }
  if (c.slurm_workers <= 0) return;
  std::unique_lock<std::mutex> lock(fleet_mu_);
  try {
    fleet_ = make_fleet(static_cast<int>(c.slurm_workers));
    fleet_->start();
  } catch (const Error& e) {
    fleet_.reset();
    lock.unlock();
    const bool others = c.local_generators > 0 || !c.worker_urls.empty() || c.discovery;
    event({{"event", "slurm_submit_failed"}, {"error", e.what()}, {"why", "start"},
           {"advice", others ? "the run goes on with its other rollout sources"
                             : "no other rollout source: fix the launch (partition, GRES, time limit, account) and start again"}});
    if (!others) throw;
  }
}

void Engine::stop_fleet() {
  std::shared_ptr<WorkerFleet> fleet;
  {
    std::lock_guard<std::mutex> lock(fleet_mu_);
    fleet = fleet_;  // kept: workers() still shows the tasks' last states
  }
  if (fleet) fleet->stop();
}

std::string Engine::launch_workers(int count, const nlohmann::json& overrides) {
  check(remote() != nullptr, "launch", "this run takes no remote workers",
        "start it with worker_urls, discovery or slurm_workers");
  std::shared_ptr<WorkerFleet> fleet;
  {
    std::lock_guard<std::mutex> lock(fleet_mu_);
    const EngineState st = state_.load();
    check(st == EngineState::Running || st == EngineState::Paused, "launch", "the run is not running");
    if (!fleet_) {  // a run that started without Slurm workers: watched from now on
      fleet_ = make_fleet(count);
      fleet_->watch();
    }
    fleet = fleet_;
  }
  return fleet->add(count, overrides);  // sbatch: not under the lock
}

void Engine::cancel_workers(const std::string& job) {
  std::shared_ptr<WorkerFleet> fleet;
  {
    std::lock_guard<std::mutex> lock(fleet_mu_);
    fleet = fleet_;
  }
  check(fleet != nullptr, "cancel", "this run launched no workers");
  fleet->cancel(job);
}

}  // namespace grpo::run
