// RunEndpoint: the trainer's HTTP routes (see run_endpoint.h) on a cluster::HttpServer.
#include "core/serve/run_endpoint.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <system_error>
#include <tuple>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/cluster/http_message.h"
#include "core/cluster/http_server.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/json_fields.h"
#include "core/common/json_limits.h"
#include "core/common/strings.h"
#include "core/records/run_dir.h"
#include "core/serve/dashboard_routes.h"
#include "core/serve/run_control.h"

namespace grpo::run {
namespace {

namespace fs = std::filesystem;
using cluster::HttpError;
using cluster::HttpRequest;
using cluster::HttpResponse;
using cluster::Reply;
using nlohmann::json;

constexpr const char* kBucketPrefix = "/grpo/bucket/";

// The run's metrics records with step > since (a torn last line, being appended, is not read).
json read_metrics(const RunFolder& run, int64_t since) { return run.metrics_since(since); }

// The events file's whole lines from index `since` (0-based over non-blank lines, in file order),
// one element each: the record, or {"event":"unreadable","line":N} for a line that is not a JSON
// object, so a reader's next index is always since + the array's size. A torn last line (being
// appended) waits. Only the file's first `events.file_bytes` bytes count; then come the events a
// full bucket holds back (`events.held`): they are the file's next lines, so a client sees a
// bucket_write_failed while the bucket is full, at the index the line will have.
json read_events(const RunFolder& run, int64_t since, const HeldEvents& events) {
  json out = json::array();
  int64_t index = 0;
  for (auto& line : RunFolder::read_jsonl(run.events_path(), 0, events.file_bytes).lines) {
    if (index++ < since) continue;
    out.push_back(line.well_formed() ? std::move(line.record) : json{{"event", "unreadable"}, {"line", index - 1}});
  }
  for (const auto& e : events.held)
    if (index++ >= since) out.push_back(e);
  return out;
}

// The ?since= number (`fallback` when absent); HttpError 400 when it is not an integer.
// The file under the run's adapters/ that a bucket request names; HttpError 403/404 otherwise.
std::string bucket_file(const RunFolder& run, const std::string& request_path) {
  const std::string rel = cluster::percent_decode(request_path.substr(std::string(kBucketPrefix).size()));
  if (rel.empty()) throw HttpError(404, "name a file: /grpo/bucket/policy-v<N>/<file>", "NotFoundError");
  for (const auto& seg : split(rel, '/'))
    if (seg.empty() || seg == "." || seg == ".." || seg.find('\0') != std::string::npos)
      throw HttpError(403, "bucket path \"" + rel + "\": only plain names below adapters/ are served");
  std::error_code ec;
  const fs::path root = fs::canonical(run.adapters_dir(), ec);
  if (ec) throw HttpError(404, "this run has no adapters/ directory", "NotFoundError");
  const fs::path file = fs::canonical(root / rel, ec);
  if (ec || !fs::is_regular_file(file, ec))
    throw HttpError(404, "bucket file " + rel + ": not found", "NotFoundError");
  const std::string r = root.string() + "/", f = file.string();
  if (!starts_with(f, r))  // a symlink leading out of adapters/
    throw HttpError(403, "bucket path \"" + rel + "\" leads outside adapters/");
  return f;
}

json ok() { return {{"ok", true}}; }

// A request body that must be a JSON object of bounded depth: grpo::Error naming `what` otherwise.
json parse_object(const std::string& body, const std::string& what, const std::string& example) {
  check(json_depth(body) <= kMaxJsonDepth, what,
        "the body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json j = json::parse(body, nullptr, false);
  check(!j.is_discarded() && j.is_object(), what, "the body must be a JSON object, e.g. " + example);
  return j;
}

// A control route's body, as parse_object reads it; HttpError 400 naming the route otherwise.
json body_object(const HttpRequest& req, const std::string& what, const std::string& example) {
  try {
    return parse_object(req.body, what, example);
  } catch (const Error& e) {
    throw HttpError(400, e.what());
  }
}

// grpo::Error from the run (a field, the scheduler's words) as 400, "no remote workers" as 409.
template <typename F>
void as_http_errors(int status, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    throw HttpError(status, e.what());
  }
}

bool plain_label(const std::string& s, size_t max) {
  return s.size() <= max && std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
}

std::string worker_url(const json& j, const std::string& peer, const std::string& what) {
  const json* port = json_field(j, "port");
  check(port && port->is_number_integer() && port->get<int64_t>() >= 1 && port->get<int64_t>() <= 65535, what,
        "field \"port\": expected the port the worker listens on, 1 to 65535");
  const std::string scheme = json_string(j, "scheme", "http");
  check(scheme == "http" || scheme == "https", what, "field \"scheme\": expected \"http\" or \"https\"");
  std::string host = peer;
  if (starts_with(host, "::ffff:") && host.find('.') != std::string::npos) host = host.substr(7);  // IPv4-mapped
  check(!host.empty() && plain_label(host, 64), what, "the request's address is unknown");
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return scheme + "://" + host + ":" + std::to_string(port->get<int64_t>());
}

}  // namespace

JoinRequest parse_join_request(const std::string& body, const std::string& peer) {
  const std::string what = "join";
  const json j = parse_object(body, what, "{\"port\": 41234}");
  JoinRequest r;
  r.url = worker_url(j, peer, what);
  for (const auto& [key, field, max] : {std::tuple<const char*, std::string*, size_t>{"name", &r.name, 128},
                                        {"job", &r.job, 40}, {"node", &r.node, 255}}) {
    const json* v = json_field(j, key);
    if (!v) continue;
    check(v->is_string() && plain_label(v->get<std::string>(), max), what,
          std::string("field \"") + key + "\": expected printable text of at most " + std::to_string(max) + " bytes");
    *field = v->get<std::string>();
  }
  check(r.job.empty() || (r.job.find_first_not_of("0123456789_") == std::string::npos && r.job.front() != '_'), what,
        "field \"job\": expected a scheduler task id such as 123 or 123_4");
  return r;
}

std::string parse_leave_request(const std::string& body, const std::string& peer) {
  return worker_url(parse_object(body, "leave", "{\"port\": 41234}"), peer, "leave");
}

std::pair<std::string, uint16_t> parse_host_port(const std::string& s, const std::string& what) {
  const auto colon = s.rfind(':');
  const std::string hint = "e.g. 127.0.0.1:8765, 0.0.0.0:0 (any free port) or [::1]:8765";
  check(colon != std::string::npos && colon > 0 && colon + 1 < s.size(), what,
        "\"" + s + "\": expected HOST:PORT", hint);
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = s.substr(colon + 1);
  check(port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos, what,
        "\"" + s + "\": the port must be a number 0..65535", hint);
  const long p = std::stol(port);
  check(p <= 65535, what, "\"" + s + "\": the port must be a number 0..65535", hint);
  return {host, static_cast<uint16_t>(p)};
}

namespace {

// Workers (docs/workers.md, "Workers on Slurm"). Join and leave come from workers; launch and
// cancel from the app or `grpo workers`. All need the cluster token, as every route here.
void add_worker_routes(cluster::HttpServer& server, RunControl* live) {
  // sbatch and scancel take seconds: on the handler pool, never on the network thread.
  const cluster::RouteOptions kSlow{.blocking = true};
  server.route("POST", "/grpo/workers/join", [=](const HttpRequest& req, Reply reply) {
    JoinRequest r;
    as_http_errors(400, [&] { r = parse_join_request(req.body, req.peer); });
    as_http_errors(409, [&] { live->join_worker(r); });
    reply.send(HttpResponse::json(200, {{"ok", true}, {"url", r.url}}));
  });
  server.route("POST", "/grpo/workers/leave", [=](const HttpRequest& req, Reply reply) {
    std::string url;
    as_http_errors(400, [&] { url = parse_leave_request(req.body, req.peer); });
    as_http_errors(409, [&] { live->leave_worker(url); });
    reply.send(HttpResponse::json(200, {{"ok", true}, {"url", url}}));
  });
  server.route("POST", "/grpo/workers/launch", [=](const HttpRequest& req, Reply reply) {
    json j = body_object(req, "launch", "{\"count\": 2}");
    const json* count = json_field(j, "count");
    if (!count || !count->is_number_integer() || count->get<int64_t>() < 1 || count->get<int64_t>() > 1000)
      throw HttpError(400, "launch: field \"count\": expected the number of workers, 1 to 1000");
    const int n = count->get<int>();
    j.erase("count");
    std::string job;
    as_http_errors(400, [&] { job = live->launch_workers(n, j); });
    reply.send(HttpResponse::json(200, {{"ok", true}, {"job", job}}));
  }, kSlow);
  server.route("POST", "/grpo/workers/cancel", [=](const HttpRequest& req, Reply reply) {
    const json j = body_object(req, "cancel", "{\"job\": \"124\"}");
    const std::string job = json_string(j, "job");
    as_http_errors(400, [&] { live->cancel_workers(job); });
    reply.send(HttpResponse::json(200, ok()));
  }, kSlow);
}

}  // namespace

RunEndpoint::RunEndpoint(RunControl& run, RunEndpointOptions options)
    : run_(run), options_(std::move(options)), run_dir_(run.run_dir()) {}

RunEndpoint::~RunEndpoint() { stop(); }

void RunEndpoint::start() {
  check(!server_, "run endpoint", "already started");
  cluster::HttpServerOptions so;
  so.host = options_.host;
  so.port = options_.port;
  so.bearer_token = options_.bearer_token;
  so.server_name = "grpo-trainer";
  so.tls_cert_file = options_.tls_cert_file;
  so.tls_key_file = options_.tls_key_file;
  server_ = std::make_unique<cluster::HttpServer>(so);
  // Adapter files and the run's JSONL files are read on the server's handler pool, never on its
  // network thread (issue 18).
  const cluster::RouteOptions kFileRead{.blocking = true};
  auto paused = std::make_shared<std::atomic<bool>>(false);
  RunControl* live = &run_;
  const std::string dir = run_dir_;
  const RunFolder run(run_dir_);
  const int64_t max_steps = options_.max_steps;
  // The live run's side of /grpo/run, which the dashboard's state reads too.
  const auto live_state = [=] {
    const EngineState st = live->state();
    return json{{"state", to_string(st)},
                {"step", live->step()},
                {"policy_version", live->policy_version()},
                {"paused", st == EngineState::Paused || paused->load()}};
  };

  server_->route("GET", std::string(kBucketPrefix) + "*", [run](const HttpRequest& req, Reply reply) {
    HttpResponse r;
    r.content_type = "application/octet-stream";
    r.body = read_file(bucket_file(run, req.path));
    reply.send(std::move(r));
  }, kFileRead);
  server_->route("GET", "/grpo/run", [=](const HttpRequest&, Reply reply) {
    json j = live_state();
    j["max_steps"] = max_steps;
    j["run_dir"] = dir;
    j["last_metrics"] = run.last_metrics();
    reply.send(HttpResponse::json(200, j));
  }, kFileRead);
  server_->route("GET", "/grpo/metrics", [run](const HttpRequest& req, Reply reply) {
    reply.send(HttpResponse::json(200, read_metrics(run, req.int_param("since", -1))));
  }, kFileRead);
  server_->route("GET", "/grpo/events", [run, live](const HttpRequest& req, Reply reply) {
    reply.send(HttpResponse::json(200, read_events(run, std::max<int64_t>(0, req.int_param("since", 0)), live->held_events())));
  }, kFileRead);
  server_->route("POST", "/grpo/run/pause", [=](const HttpRequest&, Reply reply) {
    live->pause();
    *paused = true;
    reply.send(HttpResponse::json(200, ok()));
  });
  server_->route("POST", "/grpo/run/resume", [=](const HttpRequest&, Reply reply) {
    live->resume();
    *paused = false;
    reply.send(HttpResponse::json(200, ok()));
  });
  server_->route("POST", "/grpo/run/stop", [=](const HttpRequest&, Reply reply) {
    live->stop();
    reply.send(HttpResponse::json(200, ok()));
  });
  server_->route("POST", "/grpo/run/retune", [=](const HttpRequest& req, Reply reply) {
    const json j = body_object(req, "retune", "{\"learning_rate\": 0.001} (TRL keys)");
    const std::string err = live->retune(j);
    if (!err.empty()) throw HttpError(400, err);
    reply.send(HttpResponse::json(200, ok()));
  });
  add_worker_routes(*server_, live);
  // The browser view (issue 19): the page at / and the /grpo/dashboard/* routes it reads.
  add_dashboard_routes(*server_, {.run_dirs = {dir},
                                  .live_state = live_state,
                                  .workers = [live] { return live->workers(); },
                                  .max_steps = max_steps,
                                  .config_schema = live->config_schema()});
  server_->start();
}

void RunEndpoint::stop() {
  if (server_) server_->stop();
  server_.reset();
}

std::string RunEndpoint::url() const { return server_ ? server_->url() : std::string(); }

std::string RunEndpoint::public_url() const {
  const std::string u = url();
  const std::string& h = options_.host;
  if (u.empty() || !(h.empty() || h == "0.0.0.0" || h == "::" || h == "[::]")) return u;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || !name[0]) return u;
  const auto scheme_end = u.find("://") + 3;
  const auto port = u.rfind(':');
  return u.substr(0, scheme_end) + name + u.substr(port);
}

}  // namespace grpo::run
