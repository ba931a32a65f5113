// RunEndpoint: the trainer's HTTP API (issue 5 §5), served beside a live run (RunControl) on the
// cluster's HttpServer (own thread, bearer auth with the cluster token: 401 otherwise).
//
//   GET  /grpo/bucket/<path>     bytes of <run_dir>/adapters/<path>, read-only: what workers without
//                                a shared directory fetch, e.g. /grpo/bucket/policy-v3/SHA256SUMS,
//                                /grpo/bucket/policy-v3/adapter_model.safetensors. So a worker's
//                                lora_path is <url>/grpo/bucket/policy-v<N>. "..", ".", empty
//                                segments and symlinks leading outside adapters/ -> 403; missing
//                                files and directories -> 404.
//   GET  /grpo/run               {"state","step","max_steps","policy_version","run_dir","paused",
//                                 "last_metrics":{...} (the run's last metrics record, or null)}
//   GET  /grpo/metrics?since=N   the run's metrics records with step > N (default -1: all), as an
//                                array
//   GET  /grpo/events?since=N    the run's event lines from index N on (0-based, default 0), as an
//                                array with one element per line (the next N is N + its size)
// The run's files are read through RunFolder (run_dir.h).
//   GET  /  and /grpo/dashboard/*  the browser view and the routes it reads (dashboard_routes.h);
//                                the page itself is public, its data needs the token
//   POST /grpo/run/pause|resume|stop   -> {"ok":true}
//   POST /grpo/run/retune        body: a JSON object of TRL keys -> {"ok":true}, or 400 with the
//                                engine's error text (naming the key)
//   POST /grpo/workers/join      a worker joins (docs/workers.md, "Workers on Slurm"): body
//                                {"port": 41234, "scheme": "http", "name": "...", "job": "123_4",
//                                 "node": "gpu07"} -> {"ok":true,"url":"http://<its address>:41234"};
//                                400 naming the field; 409 when the run takes no remote workers
//   POST /grpo/workers/leave     body {"port", "scheme"}: the worker at that address leaves now
//   POST /grpo/workers/launch    body {"count": N, and launch fields to change: "partition",
//                                "gres", "cpus_per_task", "mem", "time_limit", "account", "qos"}
//                                -> {"ok":true,"job":"124"}; 400 with the field or sbatch's words
//   POST /grpo/workers/cancel    body {"job": "124"}: that job's workers leave, not replaced
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace grpo::cluster {
class HttpServer;
}

namespace grpo::run {

class RunControl;

struct RunEndpointOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;         // 0: any free port
  std::string bearer_token;  // the cluster token
  std::string tls_cert_file, tls_key_file;  // both set: HTTPS (PEM files; core/cluster/tls.h)
  int64_t max_steps = 0;     // reported in /grpo/run (the engine's config is trainer-thread only)
};

// "HOST:PORT" (also "[::1]:PORT"); throws grpo::Error naming `what` when malformed.
std::pair<std::string, uint16_t> parse_host_port(const std::string& s, const std::string& what);

struct JoinRequest;
// A join request's body checked, with the URL the worker is reached at: `peer` (the address the
// request came from; an IPv4-mapped IPv6 address is written as IPv4) and the body's port and
// scheme. Throws grpo::Error naming the field and what it must be.
JoinRequest parse_join_request(const std::string& body, const std::string& peer);
// The worker URL a leave request names (its "port" and "scheme", from `peer`).
std::string parse_leave_request(const std::string& body, const std::string& peer);

class RunEndpoint {
public:
  // `run` must outlive the endpoint (stop() or destroy it before the run).
  RunEndpoint(RunControl& run, RunEndpointOptions options);
  ~RunEndpoint();
  RunEndpoint(const RunEndpoint&) = delete;
  RunEndpoint& operator=(const RunEndpoint&) = delete;

  void start();  // throws grpo::Error naming the address when it cannot listen
  void stop();
  std::string url() const;  // "http://127.0.0.1:PORT" after start()
  // The URL workers on other machines reach it at: url() with this machine's host name in place
  // of an any-address host (0.0.0.0, ::).
  std::string public_url() const;

private:
  RunControl& run_;
  RunEndpointOptions options_;
  std::string run_dir_;
  std::unique_ptr<cluster::HttpServer> server_;
};

}  // namespace grpo::run
