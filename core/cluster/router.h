// Router: the trainer's dispatcher over many rollout workers (docs/workers.md, "Prefix-affinity
// routing", "All-or-nothing adapter broadcast", "Re-dispatch"; the reference proxy of
// AmineDiro/hfjobs-lora-buckets, src/lora_proxy.py, run inside the trainer process instead of
// beside it).
// - complete(): routes each completion request to one worker by KV-prefix affinity
//   (prefix_router.h) and blocks until every request is answered or the deadline passes;
// - load_adapter(): broadcasts an adapter load all-or-nothing (per-worker retry while the answer
//   is "No adapter found", i.e. the worker's mount has not caught up; on any other failure the
//   adapter is unloaded from the workers that accepted it and the call throws);
// - a worker that is unreachable, times out (request_timeout_s), answers 5xx/404, or answers
//   with the wrong adapter name or hash is taken out and its requests in flight are dispatched
//   again elsewhere (garbage or wrong weights: quarantined, RouterOptions::quarantine_s); a
//   worker that cannot read the bucket (the load names a path outside its --bucket, or one it
//   may not read) while others loaded the adapter is taken out instead of failing the load;
//   a worker that is out is probed with backoff: /health, /v1/models, stale
//   adapter names unloaded, live adapter versions loaded, then used again.
// Everything runs in the thread that first uses the Router (its QNetworkAccessManager lives
// there); calls block in local event loops. Accounting (RouterAccounting) lets a test check that
// every dispatched request ends in exactly one bucket.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster/prefix_router.h"
#include "core/cluster/worker_client.h"

class QNetworkAccessManager;
class QNetworkReply;

namespace grpo::cluster {

struct RouterOptions {
  std::string token;                // the cluster token (Authorization: Bearer)
  TlsPins tls_pins;                 // https:// workers: accepted certificate fingerprints (tls.h)
  double request_timeout_s = 60;    // a completion slower than this takes its worker out
  double health_timeout_s = 5;
  double load_timeout_s = 300;      // PROXY_LORA_LOAD_TIMEOUT_S
  double load_retry_s = 0.5;        // PROXY_LORA_RETRY_S (later value)
  int64_t imbalance = 8;            // PROXY_IMBALANCE
  bool group_routing = true;        // our rules around the reference's (prefix_router.h); false: its rules only
  double probe_min_s = 0.25, probe_max_s = 5;  // backoff between probes of a worker that is out
  int max_attempts = 8;             // dispatches of one request before it is given up
  // A worker that answers garbage or the wrong weights is quarantined: not probed again for this
  // long, doubling with each repeat (at most 10 minutes).
  double quarantine_s = 30;
  int64_t vocab_size = 0;           // > 0: an answer with a token id outside [0, vocab_size) is garbage
};

// Every dispatch ends as exactly one of completed / redispatched / rejected / cancelled:
//   dispatched == completed + redispatched + rejected + cancelled
// and every request ends answered, abandoned (given up), or withdrawn by the caller while out
// (cancel_stream at the end of a run):  requests == completed + abandoned + withdrawn.
struct RouterAccounting {
  int64_t requests = 0, dispatched = 0, completed = 0, redispatched = 0, rejected = 0, cancelled = 0, abandoned = 0, withdrawn = 0;
  nlohmann::json to_json() const;
};

struct CompletionOutcome {
  bool ok = false;
  CompletionResponse response;
  std::string worker;   // URL of the worker that answered (or last tried)
  std::string error;    // why it failed (ok == false)
  int attempts = 0;
};

struct WorkerStatus {
  int id = 0;
  std::string url;
  std::string state;       // "joining" | "up" | "out" | "draining" | "paused"
  int64_t inflight = 0;
  int64_t completed = 0;
  std::string last_error;
  std::string adapter;     // the newest live adapter it has loaded ("" = none: the base model)
  int64_t dispatched = 0, affinity_hits = 0;  // requests sent to it; of those, routed by prefix
  int64_t tokens = 0;      // completion tokens it answered
};

// An operator's command for one worker (the desktop app's Workers page), queued from any thread
// and applied by the router's own thread between dispatches (Router::request):
//   Add, Remove (its requests in flight go elsewhere), Drain (no new requests; those in flight
//   finish), Pause (no new requests, and POST /pause?mode=wait to the worker), Resume (undoes
//   Drain and Pause: POST /resume, back in rotation).
struct WorkerCommand {
  enum Kind { Add, Remove, Drain, Pause, Resume } kind = Add;
  std::string url;
};

class Router {
public:
  using EventFn = std::function<void(const nlohmann::json&)>;
  explicit Router(RouterOptions options, EventFn on_event = {});
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Adds a worker by URL (probed on the next call); adding a known URL again is a no-op.
  void add_worker(const std::string& url);
  // Removes a worker (discovery forgot it); its requests in flight are dispatched elsewhere.
  void remove_worker(const std::string& url, const std::string& reason);
  // Thread-safe: queues `c`; the router's thread applies it at its next tick (<= 100 ms while
  // it dispatches or waits for workers). Unknown URLs are ignored (Add excepted).
  void request(WorkerCommand c);

  // Probes every worker that is out or new and waits up to `timeout_s` until at least `min_up`
  // workers are up. Returns how many are up.
  int wait_for_workers(int min_up, double timeout_s);

  std::vector<CompletionOutcome> complete(const std::vector<CompletionRequest>& requests, double deadline_s);

  // Streaming dispatch (the engine's remote producer): requests join one long-lived stream with
  // submit() and stay in flight between calls; poll() runs the router for up to `wait_s` (less
  // once something finished) and returns every request that finished since the last poll,
  // answered or given up, by the id submit() returned. A slow worker then holds up only its own
  // requests. A request still unanswered `deadline_s` after submit() is given up.
  uint64_t submit(const CompletionRequest& request, double deadline_s);
  std::vector<std::pair<uint64_t, CompletionOutcome>> poll(double wait_s);
  size_t unfinished() const;  // submitted and not yet returned by poll()
  // Gives up every unfinished streamed request (the next poll() returns them).
  void cancel_stream(const std::string& why);

  // All-or-nothing load on every worker that is up; remembered as live and loaded on workers that
  // join later. `sha256` (of adapter_model.safetensors; "" = unknown) is checked against what
  // workers report. Throws grpo::Error naming the worker and its answer when the load failed.
  void load_adapter(const std::string& name, const std::string& path, const std::string& sha256);
  // Unloads from every worker that is up and forgets the adapter (404s are not errors).
  void unload_adapter(const std::string& name);
  // POST /pause?mode=keep or /resume on every worker that is up; returns how many said 200.
  int pause_all();
  int resume_all();
  // The base model id the workers serve (from /v1/models; "" until a worker has joined).
  std::string base_model() const;

  RouterAccounting accounting() const;
  PrefixRouterStats routing_stats() const;
  std::vector<WorkerStatus> workers() const;
  int workers_up() const;  // up and taking requests (not draining or paused)
  std::vector<std::string> live_adapters() const;  // oldest first

private:
  struct Worker;
  struct Batch;
  struct Adapter {
    std::string name, path, sha256;
    int64_t order = 0;
  };
  QNetworkAccessManager& nam(size_t lane = 0);
  Worker* find(int id);
  void kick_probes(bool force);
  void apply_commands();  // the queued WorkerCommands, then the views workers() reports
  void probe(int id);
  void probe_done(int id, uint64_t epoch, bool ok, const std::string& why);
  void load_best_effort(int id, uint64_t epoch, std::vector<Adapter> todo);
  void unload_then_reprobe(int id, uint64_t epoch, std::vector<std::string> names);
  void load_on(int id, uint64_t epoch, std::vector<Adapter> todo, double deadline, std::function<void(bool, std::string)> done);
  void take_out(Worker& w, const std::string& reason);
  void quarantine(Worker& w, const std::string& reason);      // take_out, then kept out a while
  void bucket_unreadable(Worker& w, const std::string& why);  // its event, once per episode
  void dispatch(const std::shared_ptr<Batch>& b);
  void finish(Batch& b, size_t job);  // the job is answered or given up
  void give_up(Batch& b, size_t job, const std::string& why, bool withdrawn = false);
  void on_answer(const std::shared_ptr<Batch>& b, size_t job, int worker_id, const HttpResult& r);
  int broadcast(const std::string& path, const nlohmann::json& body);
  void emit_event(nlohmann::json e);

  RouterOptions opts_;
  EventFn on_event_;
  // Qt 6.4 opens at most 6 HTTP/1.1 connections per host and manager; completions spread over
  // several managers ("lanes") so a worker can batch more requests than that.
  std::vector<std::unique_ptr<QNetworkAccessManager>> nams_;
  std::thread::id owner_;
  mutable std::mutex mu_;  // guards the read-only views (accounting(), workers()) from other threads
  std::map<int, std::unique_ptr<Worker>> workers_;
  int next_id_ = 0;
  PrefixRouter prefix_;
  RouterAccounting acc_;
  std::map<std::string, Adapter> live_;
  std::set<std::string> retired_;  // unloaded adapter names: requests still naming them are given up
  std::shared_ptr<Batch> stream_;  // submit()/poll()
  int64_t adapter_order_ = 0;
  std::string base_model_;
  std::mutex commands_mu_;
  std::vector<WorkerCommand> commands_;  // queued by request(), applied by apply_commands()
};

}  // namespace grpo::cluster
