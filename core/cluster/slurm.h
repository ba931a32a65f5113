// Launching rollout workers through a cluster scheduler (docs/workers.md, "Workers on Slurm").
// WorkerLauncher is what the trainer asks of a scheduler: submit N workers as one job, poll the
// state of each of its tasks, cancel it. SlurmLauncher answers with Slurm's own commands
// (sbatch --parsable, squeue, scancel), each run with a deadline and bounded output
// (core/common/subprocess.h). Everything a user types (partition, GRES, time limit, extra sbatch
// options) is checked before sbatch sees it, and errors name the field; the worker's command goes
// into a batch script as quoted words, and every sbatch option on sbatch's own command line, so no
// value is ever read by a shell or as a #SBATCH line. Another scheduler (Kubernetes, HF Jobs)
// implements the same three calls. Torch-free, Qt-free.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace grpo::cluster {

// A task's state, as Slurm names them (squeue %T).
enum class JobState { Pending, Running, Completing, Completed, Failed, Cancelled, Timeout, Preempted, NodeFail,
                      OutOfMemory, Other };
const char* to_string(JobState s);
JobState job_state_from(const std::string& slurm_name);  // "RUNNING" -> Running; unknown -> Other
bool job_state_ended(JobState s);  // nothing more will run under it (completed, failed, cancelled, ...)

struct JobTask {
  std::string id;          // "123_4" (an array task), "123" (a plain job), "123_[2-5]" (pending tasks not yet split)
  JobState state = JobState::Other;
  std::string state_text;  // as the scheduler wrote it
  std::string reason;      // why it waits ("Resources", "Priority"); "None" when it does not
  std::string node;        // where it runs; "" while pending
  std::string time_left;   // "4:58", "UNLIMITED", as the scheduler wrote it
};

// N workers as one job (a job array): what each task runs and what it may use.
struct WorkerLaunch {
  int count = 1;                            // array tasks, [1, 1000]
  std::string job_name = "grpo-worker";     // [A-Za-z0-9_.-], at most 64
  std::string partition;                    // "" = the cluster's default
  std::string gres;                         // e.g. "gpu:1"
  int cpus_per_task = 0;                    // 0 = the partition's default; at most 1024
  std::string mem;                          // e.g. "16G" (a number with an optional K, M, G or T)
  std::string time_limit;                   // minutes, or [D-]HH:MM[:SS]
  std::string account, qos;
  std::vector<std::string> extra_options;   // more sbatch options, each "--name" or "--name=value" (at most 32)
  int drain_before_s = 0;                   // Slurm sends the worker SIGUSR1 this long before the time limit (0: never)
  std::vector<std::string> command;         // what each task runs, as argv (the first word found on the node's PATH)
  std::string script_dir;                   // an absolute folder for the batch script (the run folder's)
  std::string log_dir;                      // an absolute folder for each task's output
};

class WorkerLauncher {
public:
  virtual ~WorkerLauncher() = default;
  virtual std::string submit(const WorkerLaunch& launch) = 0;  // the job's id
  // The job's tasks now. Empty once the scheduler no longer knows the job (it ended long ago).
  virtual std::vector<JobTask> poll(const std::string& job) = 0;
  virtual void cancel(const std::string& job) = 0;
};

struct SlurmOptions {
  std::string bin_dir;               // where sbatch, squeue and scancel are; "" = PATH
  double command_timeout_s = 30;     // each command's deadline
  std::vector<std::string> env;      // "NAME=value" for the commands (e.g. SLURM_CONF)
};

class SlurmLauncher : public WorkerLauncher {
public:
  explicit SlurmLauncher(SlurmOptions options = {});
  std::string submit(const WorkerLaunch& launch) override;
  std::vector<JobTask> poll(const std::string& job) override;
  void cancel(const std::string& job) override;

private:
  std::string tool(const char* name) const;
  SlurmOptions opts_;
};

// The pieces, for tests. Each throws grpo::Error naming the field and what it must be.
// `names` renames fields in the errors (e.g. {"partition", "slurm_partition"}: a run config's keys).
void check_worker_launch(const WorkerLaunch& launch, const std::map<std::string, std::string>& names = {});
std::vector<std::string> sbatch_arguments(const WorkerLaunch& launch, const std::string& script_path);
std::string worker_batch_script(const WorkerLaunch& launch);
std::string shell_quote(const std::string& word);
// squeue -h -t all -o '%i|%T|%r|%N|%L' output for one job: at most 100,000 lines of at most 4 KiB.
std::vector<JobTask> parse_squeue(const std::string& out, const std::string& job);
// sbatch --parsable's answer ("123" or "123;cluster") as a job id.
std::string parse_sbatch_job_id(const std::string& out);
bool is_job_id(const std::string& job);  // digits only, at most 18

}  // namespace grpo::cluster
