// WorkerServer: what `grpo worker` serves. A base model (read-only) plus LoRA adapters loaded
// from the bucket at runtime, behind the subset of vLLM's OpenAI-compatible server that an async
// GRPO trainer uses (docs/workers.md, "Routes"):
//   POST /v1/completions                       token-id prompts, n, logprobs: 0, return_token_ids
//   POST /v1/load_lora_adapter, /v1/unload_lora_adapter
//   GET  /health, /v1/models, /is_paused, /server_info, /get_world_size, /version
//   POST /pause?mode=abort|wait|keep, /resume
//   GET  /grpo/status                          our addition: status_json()
// Adapters load from a directory inside --bucket, or from an http(s) URL of the trainer's
// read-only bucket endpoint (fetched with the same token, verified against SHA256SUMS).
// Every route needs "Authorization: Bearer <cluster token>". Completions carry, besides vLLM's
// fields, "grpo": {"adapter", "sha256", "worker", ...}: which adapter (name and weights hash)
// produced them. Generation runs on the batcher's thread, adapter loads on a loader thread; the
// HTTP thread only parses and answers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster/http_message.h"

namespace grpo::cluster {

struct WorkerOptions {
  std::string model_dir;           // Hugging Face layout (config.json, *.safetensors, tokenizer.json)
  std::string served_model_name;   // the base model's id in the API; default: model_dir as given
  std::string host = "127.0.0.1";
  uint16_t port = 0;               // 0: any free port
  std::string token;               // the cluster token (required)
  std::string bucket;              // adapters may only be loaded from inside this directory
  std::string name;                // the worker's name (default: hostname-port)
  std::string version;             // the program's version, reported by /version and status
  int threads = 0;                 // torch intra-op threads; 0 = library default
  int max_loras = 8;               // adapters loaded at once (>= max_staleness + 2)
  int64_t max_lora_rank = 64;
  int64_t max_batch_sequences = 256;
  int64_t max_queued_sequences = 4096;  // BatcherOptions (worker_batcher.h): more waiting -> 503
  int64_t max_queue_wait_ms = 300000;
  HttpLimits limits;
  int request_timeout_ms = 30000;
  int max_connections = 256;
  int max_connections_per_peer = 64;         // HttpServerOptions (http_server.h)
  double max_requests_per_s = 2000;          // per client address; 0 = no limit
  std::string tls_cert_file, tls_key_file;   // both set: HTTPS only (PEM)
  std::vector<std::string> tls_pins;         // https:// lora_path URLs: trusted certificate SHA-256s (tls.h)
  // Fault-injection seam (grpo worker --inject-delay-ms; `grpo bench cluster`'s straggler): each
  // completion's answer is held back this long after it is ready. 0 = off.
  int inject_delay_ms = 0;
};

class WorkerServer {
public:
  // Loads the model and tokenizer (throws grpo::Error naming what is wrong). Does not listen yet.
  explicit WorkerServer(WorkerOptions options);
  ~WorkerServer();  // stop()
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  void start();  // listens; throws grpo::Error when it cannot
  void stop();   // stops accepting, answers queued requests 503, joins threads

  uint16_t port() const;
  std::string url() const;  // "http://HOST:PORT"

  // The worker's state for discovery beacons (beacon_from_status) and /grpo/status: name, url
  // (a reachable address when listening on 0.0.0.0 or ::), model, model_fingerprint (as
  // worker_announcer's model_fingerprint), devices, version, load (queued, running,
  // connections), loaded adapters with their sha256, paused. Thread-safe; cheap.
  nlohmann::json status_json() const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The URL beacons and status carry: `bound_url` itself, or for a wildcard `host` (0.0.0.0, ::, *)
// the first non-loopback address of this machine, with the bound URL's scheme (https:// when the
// worker serves TLS).
std::string advertised_url(const std::string& host, uint16_t port, const std::string& bound_url);

// A worker downloads adapters into `tmp_dir`/grpo-worker-<pid>-XXXXXX and removes it when it stops;
// one that was killed (SIGKILL, a node's OOM killer, Slurm past its time limit) cannot. At start a
// worker removes the folders of workers that are gone: named with a pid that no longer runs, and
// owned by this user. Looks at no more than `max_entries` entries of `tmp_dir`; returns how many
// folders it removed. Folders of running workers, and names it did not make, are left alone.
int remove_dead_workers_downloads(const std::string& tmp_dir, int max_entries = 100000);

}  // namespace grpo::cluster
