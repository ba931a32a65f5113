// WorkerJoiner (worker_joiner.h): join, heartbeat and leave over the trainer's endpoint.
#include "core/cluster/worker_joiner.h"

#include <QNetworkAccessManager>

#include <chrono>
#include <cstdlib>

#include "core/cluster/http_call.h"
#include "core/common/error.h"
#include "core/common/log.h"
#include "core/common/strings.h"

namespace grpo::cluster {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool digits(const std::string& s) { return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos; }

// One POST with a deadline: "" when the trainer answered 2xx, else why not.
std::string post(QNetworkAccessManager& nam, const JoinOptions& o, const std::string& path, const nlohmann::json& body) {
  return http_call(nam, "POST", o.trainer_url + path, o.token, body.dump(), o.timeout_s, 4096).error;
}

}  // namespace

nlohmann::json join_body(const JoinOptions& o) {
  nlohmann::json j = {{"port", o.port}, {"scheme", o.scheme}};
  if (!o.name.empty()) j["name"] = o.name;
  if (!o.job.empty()) j["job"] = o.job;
  if (!o.node.empty()) j["node"] = o.node;
  return j;
}

std::string slurm_task_from_env() {
  const std::string array = env("SLURM_ARRAY_JOB_ID"), task = env("SLURM_ARRAY_TASK_ID"), job = env("SLURM_JOB_ID");
  if (digits(array) && digits(task)) return array + "_" + task;
  return digits(job) ? job : std::string();
}

std::string slurm_node_from_env() { return env("SLURMD_NODENAME").substr(0, 255); }

WorkerJoiner::WorkerJoiner(JoinOptions options) : opts_(std::move(options)) {
  check(starts_with(opts_.trainer_url, "http://") || starts_with(opts_.trainer_url, "https://"), "--join",
        "\"" + opts_.trainer_url.substr(0, 80) + "\" is not the trainer's http(s):// URL", "e.g. http://trainer-host:8765");
  while (!opts_.trainer_url.empty() && opts_.trainer_url.back() == '/') opts_.trainer_url.pop_back();
  check(opts_.port >= 1 && opts_.port <= 65535, "--join", "this worker's port is unknown");
  check(opts_.interval_s > 0 && opts_.timeout_s > 0, "--join", "the heartbeat interval and timeout must be positive");
  thread_ = std::thread([this] { loop(); });
}

WorkerJoiner::~WorkerJoiner() { stop(true); }

void WorkerJoiner::stop(bool leave) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    leave_ = leave;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool WorkerJoiner::wait_joined(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return joins_.load() > 0 || stopping_; }) &&
         joins_.load() > 0;
}

void WorkerJoiner::loop() {
  QNetworkAccessManager nam;  // this thread's: Qt objects live where they were made
  const nlohmann::json body = join_body(opts_);
  std::string last_error = "-";
  auto last_ok = std::chrono::steady_clock::now();
  bool gave_up = false;
  while (true) {
    const std::string err = post(nam, opts_, "/grpo/workers/join", body);
    if (err.empty()) last_ok = std::chrono::steady_clock::now();
    if (!err.empty() && !gave_up && joins_.load() > 0 && opts_.give_up_s > 0 &&
        std::chrono::steady_clock::now() - last_ok > std::chrono::duration<double>(opts_.give_up_s)) {
      gave_up = true;
      log_warn("the run at " + opts_.trainer_url + " has not answered for " + std::to_string(static_cast<int>(opts_.give_up_s)) +
               " s: this worker stops (--join-give-up)");
      if (opts_.on_give_up) opts_.on_give_up();
    }
    if (err.empty()) {
      if (joins_.fetch_add(1) == 0 || !last_error.empty())
        log_info("joined the run at " + opts_.trainer_url + " (port " + std::to_string(opts_.port) +
                 (opts_.job.empty() ? "" : ", task " + opts_.job) + ")");
      cv_.notify_all();
    } else if (err != last_error) {
      log_warn("could not join the run at " + opts_.trainer_url + ": " + err + " (retrying every " +
               std::to_string(static_cast<int>(opts_.interval_s)) + " s)");
    }
    last_error = err;
    std::unique_lock<std::mutex> lock(mu_);
    // After a failure, retry sooner than the heartbeat (at most every 2 s).
    const double wait = err.empty() ? opts_.interval_s : std::min(opts_.interval_s, 2.0);
    if (cv_.wait_for(lock, std::chrono::duration<double>(wait), [&] { return stopping_; })) break;
  }
  bool leave;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leave = leave_;
  }
  if (leave && joins_.load() > 0) {
    const std::string err = post(nam, opts_, "/grpo/workers/leave", {{"port", opts_.port}, {"scheme", opts_.scheme}});
    if (!err.empty()) log_warn("could not tell the run this worker leaves: " + err);
  }
}

}  // namespace grpo::cluster
