// WorkerJoiner: the `grpo worker --join URL` side of joining a run without multicast (docs/workers.md,
// "Workers on Slurm"). On a thread of its own, with its own Qt event loop, it asks the trainer's
// endpoint to take this worker (POST /grpo/workers/join with the cluster token: the port it
// listens on, its name, node and scheduler task), then repeats the request every interval as a
// heartbeat, so a trainer that restarted takes the worker back. On stop it says it is leaving
// (POST /grpo/workers/leave), so the trainer drops it at once instead of after failed requests.
// Every request has a deadline; failures are logged when they change, never thrown.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace grpo::cluster {

struct JoinOptions {
  std::string trainer_url;    // the run's endpoint, http(s)://host:port
  std::string token;          // the cluster token
  int port = 0;               // where this worker listens (its own URL's port)
  std::string scheme = "http";
  std::string name, job, node;
  double interval_s = 15;     // between heartbeats
  double timeout_s = 10;      // per request
  // Once joined, a trainer unreachable (or refusing) for this long means the run is gone (killed
  // with its jobs left behind): on_give_up is called once, and the worker should exit so its
  // allocation is freed. 0: never.
  double give_up_s = 600;
  std::function<void()> on_give_up;
};

// The join request's body for `o` (what POST /grpo/workers/join reads).
nlohmann::json join_body(const JoinOptions& o);
// The scheduler task this process runs in, from Slurm's environment: "<array job>_<task>" in a
// job array, "<job>" otherwise, "" outside Slurm. The node from SLURMD_NODENAME.
std::string slurm_task_from_env();
std::string slurm_node_from_env();

class WorkerJoiner {
public:
  explicit WorkerJoiner(JoinOptions options);  // throws grpo::Error for a trainer URL that is not http(s)://
  ~WorkerJoiner();                             // stop(true)
  WorkerJoiner(const WorkerJoiner&) = delete;
  WorkerJoiner& operator=(const WorkerJoiner&) = delete;

  // Ends the heartbeats; with `leave`, tells the trainer first (bounded by timeout_s). Idempotent.
  void stop(bool leave = true);
  int64_t joins() const { return joins_.load(); }  // requests the trainer accepted
  // Blocks until the trainer accepted a join or `timeout_s` passed; true when it did.
  bool wait_joined(double timeout_s);

private:
  void loop();
  JoinOptions opts_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false, leave_ = true;
  std::atomic<int64_t> joins_{0};
};

}  // namespace grpo::cluster
