// The browser view (issue 19): the web dashboard and the HTTP routes it reads, mounted on a
// cluster::HttpServer beside a live run's RunEndpoint (`grpo train --serve`) or on their own for
// run directories on disk (`grpo serve RUN_DIR`, read-only). docs/dashboard.md is the user's guide.
//
// Public (no token; static bytes compiled into the binary from web/, no data in them):
//   GET  /  /index.html  /app.js  /style.css  /favicon.svg  /vendor/uplot/...
//        with a strict Content-Security-Policy (self only, no inline script), nosniff, no referrer.
// Bearer token (the cluster token; 401 without it, as every other route):
//   GET  /grpo/dashboard/state          {"instance","live","read_only","runs":[...],"state","step",
//                                        "max_steps","policy_version","paused","verdict","advice",
//                                        "last_time","config":{...}}: what the header shows, 1/s
//   GET  /grpo/dashboard/series?run=K&since=S&points=P&keys=a,b
//        the metrics of run K (default 0) with step > S (default -1: all) as columns:
//        {"epoch","rows","last_step","sampled","x":[steps],"series":{key:[values or null]}}.
//        More than P rows (default 2000, 64..20000) are decimated to at most P by min/max
//        buckets: each bucket of steps becomes two x slots holding every series' minimum and
//        maximum in the order they occur, so no spike is lost at chart resolution. "epoch"
//        changes when the metrics file was rewritten (a resume truncated it): reload from -1.
//   GET  /grpo/dashboard/samples?limit=N the run's last N sampled completions (N <= 200)
//   GET  /grpo/dashboard/workers        a live run's remote workers (tok/s rated here), else []
//   GET  /grpo/dashboard/adapters       [{"version","name","files":[{"name","bytes"}]}]
//   GET  /grpo/dashboard/adapter/<N>/<file>  one file of adapters/policy-v<N>/ (PEFT layout)
//   GET  /grpo/config/schema            the config key table (core/grpo/config_schema.h): name,
//                                        type, group, doc, default, retunable, range
// Reading the files happens on the server's handler pool (blocking routes), never on its network
// thread; every reply is bounded (points, limit, rows per reply).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/records/engine_types.h"

namespace grpo::cluster {
class HttpServer;
}

namespace grpo::run {

struct DashboardSource {
  // runs[0]: the run shown; the others are read-only runs offered for comparison on the same charts.
  std::vector<std::string> run_dirs;
  // A live run's engine: {"state","step","policy_version","paused"} (RunEndpoint's /grpo/run
  // fields). Unset: the runs are read from disk only and the page offers no controls.
  std::function<nlohmann::json()> live_state;
  // A live run's remote workers, raw counters (tok_s is rated here from successive calls).
  std::function<std::vector<WorkerInfo>()> workers;
  int64_t max_steps = 0;  // 0: the config's max_steps
  // The key table a retune is checked against (core/grpo/config_schema_json.h), served at
  // GET /grpo/config/schema; the serving code holds no key table of its own.
  nlohmann::json config_schema = nlohmann::json::array();
};

// Mounts the page and the /grpo/dashboard/* and /grpo/config/schema routes. Call before
// server.start(). Throws grpo::Error when run_dirs is empty.
void add_dashboard_routes(cluster::HttpServer& server, DashboardSource source);

// For a run read from disk (`grpo serve`): GET /grpo/run, /grpo/metrics?since=, /grpo/events?since=
// in RunEndpoint's shapes (run_endpoint.h), so the page and the desktop app's attach read a past
// run as they read a live one. No control routes.
void add_run_folder_routes(cluster::HttpServer& server, const std::string& run_dir);

// The address to open: "<server_url>/#token=<token>" (a fragment never leaves the browser).
std::string dashboard_url(const std::string& server_url, const std::string& token);

}  // namespace grpo::run
