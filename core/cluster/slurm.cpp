#include "core/cluster/slurm.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/common/subprocess.h"

namespace grpo::cluster {
namespace {

constexpr size_t kMaxSqueueLines = 100000;
constexpr size_t kMaxLineBytes = 4096;
constexpr int kMaxTasks = 1000;
constexpr size_t kMaxExtraOptions = 32;
constexpr size_t kMaxArgs = 256;
constexpr size_t kMaxArgBytes = 4096;

// Options this launcher sets itself: a user's copy would change what it polls or where logs go.
const char* const kOwnOptions[] = {"--array", "--output", "--error", "--job-name", "--parsable", "--wrap",
                                   "--partition", "--gres", "--cpus-per-task", "--mem", "--time",
                                   "--account", "--qos", "--chdir", "--signal"};

bool matches(const std::string& s, const char* pattern) { return std::regex_match(s, std::regex(pattern)); }


bool plain_text(const std::string& s) {
  return std::none_of(s.begin(), s.end(), [](unsigned char c) { return c == '\0' || c == '\n' || c == '\r'; });
}

}  // namespace

const char* to_string(JobState s) {
  switch (s) {
    case JobState::Pending: return "pending";
    case JobState::Running: return "running";
    case JobState::Completing: return "completing";
    case JobState::Completed: return "completed";
    case JobState::Failed: return "failed";
    case JobState::Cancelled: return "cancelled";
    case JobState::Timeout: return "timeout";
    case JobState::Preempted: return "preempted";
    case JobState::NodeFail: return "node_fail";
    case JobState::OutOfMemory: return "out_of_memory";
    case JobState::Other: break;
  }
  return "other";
}

JobState job_state_from(const std::string& name) {
  static const std::pair<const char*, JobState> kNames[] = {
      {"PENDING", JobState::Pending},        {"CONFIGURING", JobState::Pending}, {"REQUEUED", JobState::Pending},
      {"RUNNING", JobState::Running},        {"COMPLETING", JobState::Completing},
      {"COMPLETED", JobState::Completed},    {"FAILED", JobState::Failed},       {"BOOT_FAIL", JobState::Failed},
      {"CANCELLED", JobState::Cancelled},    {"TIMEOUT", JobState::Timeout},     {"DEADLINE", JobState::Timeout},
      {"PREEMPTED", JobState::Preempted},    {"NODE_FAIL", JobState::NodeFail},
      {"OUT_OF_MEMORY", JobState::OutOfMemory}};
  for (const auto& [n, s] : kNames)
    if (name == n) return s;
  return JobState::Other;
}

bool job_state_ended(JobState s) {
  return s != JobState::Pending && s != JobState::Running && s != JobState::Completing && s != JobState::Other;
}

bool is_job_id(const std::string& job) {
  return !job.empty() && job.size() <= 18 && std::all_of(job.begin(), job.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void check_worker_launch(const WorkerLaunch& l, const std::map<std::string, std::string>& names) {
  const auto field = [&names](bool ok, const std::string& name, const std::string& value, const std::string& expected) {
    const auto renamed = names.find(name);
    if (!ok)
      throw Error("slurm launch", (names.empty() ? "field \"" : "key \"") + (renamed == names.end() ? name : renamed->second) +
                                      "\": \"" + value + "\" is not valid: expected " + expected);
  };
  field(l.count >= 1 && l.count <= kMaxTasks, "count", std::to_string(l.count), "1 to 1000 workers");
  field(matches(l.job_name, "[A-Za-z0-9_.-]{1,64}"), "job_name", l.job_name, "1 to 64 of A-Z a-z 0-9 _ . -");
  field(matches(l.partition, "[A-Za-z0-9_.,-]{0,128}"), "partition", l.partition, "a partition name (or a comma list)");
  field(matches(l.gres, "[A-Za-z0-9_:.,-]{0,128}"), "gres", l.gres, "a GRES such as gpu:1 or gpu:a100:2");
  field(l.cpus_per_task >= 0 && l.cpus_per_task <= 1024, "cpus_per_task", std::to_string(l.cpus_per_task), "0 to 1024");
  field(matches(l.mem, "([0-9]{1,9}[KMGT]?)?"), "mem", l.mem, "a size such as 16G");
  field(matches(l.time_limit, "([0-9]{1,6}|([0-9]{1,4}-)?[0-9]{1,2}:[0-9]{2}(:[0-9]{2})?)?"), "time_limit", l.time_limit,
        "minutes, or [D-]HH:MM[:SS]");
  field(matches(l.account, "[A-Za-z0-9_.-]{0,64}"), "account", l.account, "an account name");
  field(matches(l.qos, "[A-Za-z0-9_.-]{0,64}"), "qos", l.qos, "a QOS name");
  field(l.extra_options.size() <= kMaxExtraOptions, "extra_options", std::to_string(l.extra_options.size()) + " options",
        "at most 32");
  for (const auto& o : l.extra_options) {
    field(o.size() <= 256 && plain_text(o) && matches(o, "--[a-z][a-z0-9-]*(=.*)?"), "extra_options", o,
          "an sbatch option written --name or --name=value");
    const std::string name = o.substr(0, o.find('='));
    for (const char* own : kOwnOptions)
      field(name != own, "extra_options", o, "an option other than those the launch sets itself (" + name + ")");
  }
  field(l.drain_before_s >= 0 && l.drain_before_s <= 65535, "drain_before_s", std::to_string(l.drain_before_s),
        "0 to 65535 seconds");
  field(!l.command.empty() && l.command.size() <= kMaxArgs, "command", std::to_string(l.command.size()) + " words",
        "1 to 256 words");
  for (const auto& a : l.command)
    field(a.size() <= kMaxArgBytes && a.find('\0') == std::string::npos, "command", a.substr(0, 80),
          "words without NUL, at most 4 KiB each");
  field(!l.command[0].empty(), "command", "", "a program first");
  field(!l.script_dir.empty() && l.script_dir[0] == '/' && plain_text(l.script_dir), "script_dir", l.script_dir,
        "an absolute folder");
  field(!l.log_dir.empty() && l.log_dir[0] == '/' && plain_text(l.log_dir), "log_dir", l.log_dir, "an absolute folder");
}

std::string worker_batch_script(const WorkerLaunch& l) {
  check_worker_launch(l);
  std::string s = "#!/bin/sh\n# Written by GRPO Studio: one rollout worker per array task (docs/workers.md).\n"
                  "# Its options are on sbatch's command line; this file only runs the worker.\nexec";
  for (const auto& a : l.command) {
    s += ' ';
    s += shell_quote(a);
  }
  return s + "\n";
}

std::vector<std::string> sbatch_arguments(const WorkerLaunch& l, const std::string& script_path) {
  check_worker_launch(l);
  std::vector<std::string> a = {"--parsable", "--job-name=" + l.job_name, "--array=0-" + std::to_string(l.count - 1),
                                "--output=" + l.log_dir + "/%x-%A_%a.out"};
  auto opt = [&](const char* name, const std::string& v) {
    if (!v.empty()) a.push_back(std::string(name) + "=" + v);
  };
  opt("--partition", l.partition);
  opt("--gres", l.gres);
  opt("--cpus-per-task", l.cpus_per_task > 0 ? std::to_string(l.cpus_per_task) : "");
  opt("--mem", l.mem);
  opt("--time", l.time_limit);
  opt("--account", l.account);
  opt("--qos", l.qos);
  // B: the signal goes to the batch shell, which is the worker itself (the script execs it).
  opt("--signal", l.drain_before_s > 0 ? "B:USR1@" + std::to_string(l.drain_before_s) : "");
  a.insert(a.end(), l.extra_options.begin(), l.extra_options.end());
  a.push_back(script_path);
  return a;
}

std::string parse_sbatch_job_id(const std::string& out) {
  const std::string line = trim(std::string_view(out).substr(0, 256));
  const std::string id = line.substr(0, line.find(';'));  // "123;cluster" on a federation
  check(is_job_id(id), "sbatch", "answered \"" + line.substr(0, 80) + "\" where a job id was expected");
  return id;
}

std::vector<JobTask> parse_squeue(const std::string& out, const std::string& job) {
  check(is_job_id(job), "squeue", "\"" + job.substr(0, 40) + "\" is not a job id");
  const std::regex id_re(job + "(_([0-9]{1,9}|\\[[0-9,%:-]{1,256}\\]))?");
  std::vector<JobTask> tasks;
  size_t start = 0, lines = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = trim(std::string_view(out).substr(start, std::min(end - start, kMaxLineBytes + 1)));
    start = end + 1;
    if (line.empty()) continue;
    check(++lines <= kMaxSqueueLines, "squeue", "more than 100,000 lines for one job");
    check(line.size() <= kMaxLineBytes, "squeue", "a line longer than 4 KiB");
    std::vector<std::string> f;
    size_t p = 0;
    for (size_t bar; (bar = line.find('|', p)) != std::string::npos; p = bar + 1) f.push_back(line.substr(p, bar - p));
    f.push_back(line.substr(p));
    check(f.size() == 5, "squeue", "a line without 5 fields (id|state|reason|node|time left): " + line.substr(0, 120));
    check(std::regex_match(f[0], id_re), "squeue", "a task id \"" + f[0].substr(0, 60) + "\" that is not of job " + job);
    JobTask t;
    t.id = f[0];
    t.state_text = f[1];
    t.state = job_state_from(f[1]);
    t.reason = f[2];
    t.node = f[3] == "(null)" ? "" : f[3];
    t.time_left = f[4];
    tasks.push_back(std::move(t));
  }
  return tasks;
}

SlurmLauncher::SlurmLauncher(SlurmOptions options) : opts_(std::move(options)) {}

std::string SlurmLauncher::tool(const char* name) const { return opts_.bin_dir.empty() ? name : path_join(opts_.bin_dir, name); }

std::string SlurmLauncher::submit(const WorkerLaunch& launch) {
  const std::string script = worker_batch_script(launch);
  for (const auto* dir : {&launch.script_dir, &launch.log_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    check(!ec, *dir, "cannot create the folder: " + ec.message());
  }
  const std::string path = path_join(launch.script_dir, launch.job_name + ".sbatch");
  write_file_atomic(path, script);
  ::chmod(path.c_str(), 0700);  // the script names no secret, but nobody else needs to write it
  std::vector<std::string> argv = {tool("sbatch")};
  for (auto& a : sbatch_arguments(launch, path)) argv.push_back(std::move(a));
  const CommandResult r = run_command(argv, {opts_.command_timeout_s, 1 << 20, opts_.env});
  check(r.ok(), "sbatch", "the job was not submitted: " + r.describe(),
        "check the partition, GRES, time limit and account against `sinfo` and your cluster's rules");
  return parse_sbatch_job_id(r.out);
}

std::vector<JobTask> SlurmLauncher::poll(const std::string& job) {
  check(is_job_id(job), "squeue", "\"" + job.substr(0, 40) + "\" is not a job id");
  const CommandResult r = run_command({tool("squeue"), "-h", "-t", "all", "-j", job, "-o", "%i|%T|%r|%N|%L"},
                                      {opts_.command_timeout_s, 16 << 20, opts_.env});
  // A job the controller has forgotten (it ended more than MinJobAge ago) is an error to squeue.
  if (!r.ok() && r.err.find("Invalid job id") != std::string::npos) return {};
  check(r.ok(), "squeue", "could not read job " + job + ": " + r.describe());
  check(!r.truncated, "squeue", "answered more than 16 MiB for job " + job);
  return parse_squeue(r.out, job);
}

void SlurmLauncher::cancel(const std::string& job) {
  check(is_job_id(job), "scancel", "\"" + job.substr(0, 40) + "\" is not a job id");
  const CommandResult r = run_command({tool("scancel"), job}, {opts_.command_timeout_s, 1 << 20, opts_.env});
  check(r.ok(), "scancel", "job " + job + " was not cancelled: " + r.describe());
}

}  // namespace grpo::cluster
