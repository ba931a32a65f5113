// RemoteSource: a RolloutSource over remote workers (docs/ARCHITECTURE.md, "Workers and the wire";
// details: docs/workers.md). It owns a cluster::Router (and, with discovery on, a WorkerDirectory
// listening for signed beacons), both created in the engine's producer thread on the first
// generate() so their sockets live there. generate() sends one /v1/completions request per
// completion (n = 1, as TRL's rollout worker does, so a group's G requests share a prefix on one
// worker) with model "policy-v<N>" of the newest version loaded on every worker, and converts the
// answers to rollout::Completion. on_version_published() only records the version; the next
// generate() broadcasts the load and unloads versions that left the staleness window
// (max_staleness + 1 stay registered, loading the new one before unloading the oldest, as TRL
// does: docs/workers.md, "Adapter versions kept"). Workers joining and leaving become events
// through `on_event` (the engine's events file).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config.h"
#include "core/records/engine_types.h"
#include "core/run/rollout_source.h"

namespace grpo::cluster {
struct CompletionOutcome;
struct CompletionRequest;
class Router;
class WorkerDirectory;
}  // namespace grpo::cluster

namespace grpo::run {

struct RemoteSourceOptions {
  std::vector<std::string> worker_urls;
  std::string token;                    // the cluster token itself
  std::vector<std::string> tls_pins;    // cfg.cluster_tls_fingerprint, parsed (core/cluster/tls.h)
  bool discovery = false;
  std::string discovery_address;        // group:port (cfg.discovery_address)
  double discovery_forget_s = 15;
  double worker_timeout_s = 60;         // per completion request
  bool group_routing = true;            // cfg.worker_routing == "group" (cluster::RouterOptions)
  int64_t vocab_size = 0;               // the base model's (config.json); > 0: answers are checked
  double wait_for_workers_s = 30;       // how long generate() waits for a first worker
  bool joins = false;                   // workers may join by themselves (join()): none needed at start
  int64_t keep_versions = 5;            // registered on workers: max_staleness + 1
  std::string run_dir;                  // its events file gets the final accounting
  std::function<void(const nlohmann::json&)> on_event;
};

// Reads the token file (cfg.cluster_token_file or the default path; created when missing).
RemoteSourceOptions remote_options_from_config(const grpo::TrainConfig& cfg, const std::string& run_dir);

// Completions counted at the source: every completion the router answered is delivered to the
// engine in a group, or discarded with its batch when another completion of that batch failed.
struct RemoteAccounting {
  int64_t delivered_groups = 0, delivered_completions = 0, discarded_completions = 0, duplicate_groups = 0;
  int64_t failed_batches = 0;
  nlohmann::json router;                // cluster::RouterAccounting::to_json()
  nlohmann::json routing;               // routed, affinity, spilled, unmatched, grouped (PrefixRouterStats)
  nlohmann::json to_json() const;
};

class RemoteSource : public RolloutSource {
public:
  explicit RemoteSource(RemoteSourceOptions options, std::string name = "workers");
  ~RemoteSource() override;

  std::string name() const override { return name_; }
  std::vector<RolloutResult> generate(const std::vector<RolloutRequest>& requests,
                                      const rollout::SamplingParams& params) override;
  void on_version_published(int64_t version, const std::string& adapter_dir) override;
  void on_max_staleness(int64_t max_staleness) override;
  bool streams() const override { return true; }
  void stream(const StreamHooks& hooks) override;
  int64_t tokens_generated() const override { return tokens_.load(); }

  RemoteAccounting accounting() const;
  // The newest version the workers were asked to load, set once the versions that left the
  // staleness window have been unloaded from them.
  int64_t loaded_version() const { return loaded_version_.load(); }
  std::optional<int64_t> sampling_version() const override { return loaded_version_.load(); }
  // Any thread: the router's workers with raw counters (tok_s left 0: the periodic caller rates
  // them), and an operator command queued into the router, applied between its dispatches.
  std::vector<WorkerInfo> workers() const;
  void command(WorkerAction action, const std::string& url);
  // A worker that asked to join (POST /grpo/workers/join): added as a worker URL is, probed first,
  // shown under `name`, and tied to its scheduler task `job` ("" = none). Again for a URL already
  // known: a no-op, so a worker may repeat its join as a heartbeat. True the first time this URL
  // joined. Any thread.
  bool join(const std::string& url, const std::string& name, const std::string& job);
  // The URLs of the workers that joined from scheduler task `job` ("123_4"). Any thread.
  std::vector<std::string> urls_of_job(const std::string& job) const;

private:
  void start_in_this_thread();
  // Throws when none is up after wait_for_workers_s; returns early (quietly) once `stop` says so.
  void wait_for_a_worker(const std::function<bool()>& stop = {});
  std::vector<cluster::CompletionRequest> requests_for(const RolloutRequest& r, const rollout::SamplingParams& params,
                                                       const std::string& model) const;
  rollout::Completion to_completion(const cluster::CompletionOutcome& o);
  void count_delivered(const RolloutResult& r);
  void take_up_new_version();
  std::string model_for(int64_t version) const;
  // stream()'s parts: the groups it has out, and what it does with them (remote_source.cpp).
  struct StreamState;
  bool tend_workers(const std::function<bool()>& stop);  // waits for a worker or takes up a new version; false while no router exists
  void refill(StreamState& st, const StreamHooks& hooks);
  void collect(StreamState& st, double wait_s, const StreamHooks& hooks);
  void settle(StreamState& st, int64_t group_id, const StreamHooks& hooks);
  void end_stream(StreamState& st, const StreamHooks& hooks);

  RemoteSourceOptions opts_;
  std::string name_;
  std::unique_ptr<cluster::Router> router_;
  std::unique_ptr<cluster::WorkerDirectory> directory_;
  std::atomic<int64_t> loaded_version_{0};
  // Versions kept registered on workers: opts_.keep_versions at start, then a retune's
  // (on_max_staleness, trainer thread; read by the producer thread when it loads a version).
  std::atomic<int64_t> keep_versions_{0};
  std::map<int64_t, std::string> loaded_;  // versions live on the workers (producer thread)
  std::mutex pending_mu_;
  std::map<int64_t, std::string> pending_;  // published, not yet loaded
  std::atomic<int64_t> tokens_{0};
  mutable std::mutex acc_mu_;
  RemoteAccounting acc_;
  std::set<int64_t> seen_groups_;
  mutable std::mutex view_mu_;  // router_'s creation against workers()/command() from other threads
  std::vector<std::pair<WorkerAction, std::string>> early_;  // commands given before the router existed
  std::map<std::string, std::string> names_;  // url -> the name discovery announced, or a joined worker's
  std::map<std::string, std::string> jobs_;   // url -> the scheduler task a joined worker runs in
  std::set<std::string> joined_;              // URLs that joined by themselves (join())
};

}  // namespace grpo::run
