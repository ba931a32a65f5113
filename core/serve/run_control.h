// RunControl: what the serving library needs of a live run, and all it knows of one. The training
// library's Engine implements it; RunEndpoint (run_endpoint.h) serves it. So the serving code
// (endpoint, dashboard routes) links no trainer, model or LibTorch (docs/ARCHITECTURE.md, "Layers").
// Every method is called from the HTTP server's threads, so each must be thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/records/engine_types.h"

namespace grpo::run {

// The events a full bucket keeps out of the events file for now (they go to the file next, in
// this order) and the file's size, taken together while no event can be written: the file's first
// `file_bytes` bytes, then `held`, are the events file to be (RunEndpoint's /grpo/events). (Past
// 10,000 held events the oldest are dropped unwritten; a client that saw them then skips as many
// later lines.)
struct HeldEvents {
  uint64_t file_bytes = 0;
  std::deque<nlohmann::json> held;
};

// A worker asking to join the run (POST /grpo/workers/join), as the endpoint checked it
// (parse_join_request, run_endpoint.h). The URL is built from the address the request came from
// and the port the worker listens on, so a worker behind another subnet's router is reached the
// way its request reached the trainer.
struct JoinRequest {
  std::string url;   // "http://10.0.3.7:41234"
  std::string name;  // shown in the Workers views ("" = host:port)
  std::string job;   // the scheduler task it runs in, "123_4" ("" = none)
  std::string node;  // the node's name as the scheduler knows it
};

class RunControl {
public:
  virtual ~RunControl() = default;

  virtual std::string run_dir() const = 0;
  virtual EngineState state() const = 0;
  virtual int64_t step() const = 0;
  virtual int64_t policy_version() const = 0;
  virtual HeldEvents held_events() = 0;
  // The run's remote workers with raw counters (tok_s left 0: the dashboard rates them).
  virtual std::vector<WorkerInfo> workers() const = 0;
  // The key table the run checks retunes against, as GET /grpo/config/schema serves it.
  virtual nlohmann::json config_schema() const = 0;

  virtual void pause() = 0;
  virtual void resume() = 0;
  virtual void stop() = 0;
  // Validates `changes` now and applies them at the next step boundary: "" when accepted, else an
  // error naming the key and the reason (nothing changes).
  virtual std::string retune(const nlohmann::json& changes) = 0;

  // ---- workers (docs/workers.md, "Workers on Slurm") ----
  // A worker joins, or repeats its join as a heartbeat: added to the run's router by URL (probed
  // first). True the first time this URL joined. Throws grpo::Error when the run takes no remote
  // workers.
  virtual bool join_worker(const JoinRequest& request) = 0;
  // A worker leaves (drained before its time limit, or stopping): the router drops it now.
  virtual void leave_worker(const std::string& url) = 0;
  // Asks the scheduler for `count` more workers, with launch fields changed (partition, gres,
  // cpus_per_task, mem, time_limit, account, qos): the job's id. Throws grpo::Error naming the
  // field, or with the scheduler's words.
  virtual std::string launch_workers(int count, const nlohmann::json& overrides) = 0;
  // Cancels one of the run's scheduler jobs; its workers leave and are not replaced.
  virtual void cancel_workers(const std::string& job) = 0;
};

}  // namespace grpo::run
