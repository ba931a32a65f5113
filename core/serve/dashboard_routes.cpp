// The browser view's routes (see dashboard_routes.h): the page's static files, and what it reads,
// from a per-run cache that follows the run's metrics and events as they grow (RunFolder,
// JsonlTail), so a poll costs the new lines only, not a re-read of a long run's files.
#include "core/serve/dashboard_routes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "core/cluster/http_message.h"
#include "core/cluster/http_server.h"
#include "core/common/json_fields.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/records/catalogue.h"
#include "core/records/charts.h"
#include "core/records/metrics_record.h"
#include "core/records/run_dir.h"
#include "core/records/run_status.h"
#include "core/records/throughput_advisor.h"
#include "core/serve/web_assets.h"

namespace grpo::run {

namespace {

namespace fs = std::filesystem;
using cluster::HttpError;
using cluster::HttpRequest;
using cluster::HttpResponse;
using cluster::HttpServer;
using cluster::Reply;
using cluster::RouteOptions;
using nlohmann::json;

// Bounds: rows a run's cache keeps (past it every other row is dropped: the older half thins out),
// distinct metric keys, points and keys a series reply may hold, records per events/metrics reply.
constexpr size_t kMaxRows = size_t(1) << 18;
constexpr size_t kMaxKeys = 512;
constexpr size_t kDefaultPoints = 2000, kMinPoints = 64, kMaxPoints = 20000;
constexpr size_t kMaxKeysPerReply = 64;
constexpr size_t kMaxEventsPerReply = 2000;
constexpr size_t kMaxMetricsPerReply = 5000;
constexpr size_t kMaxSamples = 200;
constexpr uint64_t kMaxDownloadBytes = uint64_t(2) << 30;

// The page's headers: nothing loads from anywhere but this server, no inline script or style
// element, no framing, no referrer (the token lives in the fragment, which is never sent anyway).
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void add_page_headers(HttpResponse& r) {
  r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Cache-Control", "no-cache");
}

HttpResponse json_reply(const json& j) {
  HttpResponse r = HttpResponse::json(200, j);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// A number for JSON with about float precision ("null" for NaN and infinities).
void append_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%.7g", v);
  out.append(buf, static_cast<size_t>(n));
}

// ---------------------------------------------------------------------------------------------
// RunCache: one run's metrics as columns and its events, followed as the files grow.

class RunCache {
public:
  explicit RunCache(std::string dir) : run_(std::move(dir)), metrics_(run_.follow_metrics()) {}

  const RunFolder& folder() const { return run_; }

  // Everything the series route needs, under the lock.
  std::string series_json(int64_t since, size_t points, const std::vector<std::string>& keys);
  // {"step","policy_version","last_time","verdict","last_metrics"} of the newest record.
  json last_row();
  // The run's events from index `since` (at most kMaxEventsPerReply), RunEndpoint's shape.
  json events_since(int64_t since);
  // The state the events say (run_state_after, as `grpo status`).
  std::string event_state();

private:
  void refresh_metrics();  // lock held
  void add_record(const json& rec);
  void drop_from(double step);
  void thin_out();
  void refresh_events();  // lock held

  std::mutex mu_;
  RunFolder run_;
  JsonlTail metrics_;
  int64_t epoch_ = 0;
  std::vector<double> steps_, times_;
  std::map<std::string, std::vector<float>> columns_;
  json last_record_;
  // Events: the parsed file, re-read when its size changed (a small file; RunEndpoint reads it whole too).
  uint64_t events_bytes_ = UINT64_MAX;
  std::vector<json> events_;
};

void RunCache::refresh_metrics() {
  for (int chunk = 0; chunk < 64; ++chunk) {  // each read_new() is at most one 64 MiB chunk
    auto lines = metrics_.read_new();
    if (lines.empty()) break;
    for (const auto& l : lines)
      if (l.well_formed()) add_record(l.record);
  }
}

void RunCache::add_record(const json& rec) {
  MetricsRecord r;
  if (!read_metrics_record(rec, &r)) return;
  const double step = static_cast<double>(r.step);
  if (!steps_.empty() && step <= steps_.back()) drop_from(step);  // the file was rewritten (resume)
  if (steps_.size() >= kMaxRows) thin_out();
  const size_t row = steps_.size();
  steps_.push_back(step);
  times_.push_back(r.time);
  for (auto& [k, col] : columns_) col.push_back(NAN);
  auto set = [&](const std::string& k, double v) {
    auto it = columns_.find(k);
    if (it == columns_.end()) {
      if (columns_.size() >= kMaxKeys) return;
      it = columns_.emplace(k, std::vector<float>(row + 1, NAN)).first;
    }
    it->second[row] = static_cast<float>(v);
  };
  for (const auto& [k, v] : r.metrics) set(k, v);
  // Derived metrics (trained tok/s), as the desktop derives them (core/records/charts.h): before
  // decimation, so a bucket's extremes are the rate's own.
  for (const auto& [k, v] : derived_metrics(r.metrics)) set(k, v);
  last_record_ = rec;
}

void RunCache::drop_from(double step) {
  const size_t keep = static_cast<size_t>(std::lower_bound(steps_.begin(), steps_.end(), step) - steps_.begin());
  steps_.resize(keep);
  times_.resize(keep);
  for (auto& [k, col] : columns_) col.resize(keep);
  ++epoch_;
}

void RunCache::thin_out() {  // keeps rows 1, 3, 5, ... and the newest: the run's shape at half the rows
  auto halve = [](auto& v) {
    size_t w = 0;
    for (size_t i = 1; i < v.size(); i += 2) v[w++] = v[i];
    v.resize(w);
  };
  halve(steps_);
  halve(times_);
  for (auto& [k, col] : columns_) halve(col);
  ++epoch_;
}

// Min/max decimation into two x slots per bucket (the bucket's first and last step): each series
// puts its minimum and maximum there in the order they occur. Rows [first, end) -> about `points`.
void append_decimated(std::string& out, const std::vector<double>& steps, size_t first, size_t end, size_t points,
                      const std::vector<std::pair<std::string, const std::vector<float>*>>& cols) {
  const size_t n = end - first, buckets = std::max<size_t>(1, points / 2);
  std::vector<size_t> lo(buckets + 1);
  for (size_t b = 0; b <= buckets; ++b) lo[b] = first + n * b / buckets;
  auto slots = [&](size_t b) { return lo[b + 1] - lo[b] >= 2 ? 2 : 1; };
  out += "\"x\":[";
  for (size_t b = 0; b < buckets; ++b) {
    if (lo[b + 1] == lo[b]) continue;
    if (out.back() != '[') out += ',';
    append_number(out, steps[lo[b]]);
    if (slots(b) == 2) out += ',', append_number(out, steps[lo[b + 1] - 1]);
  }
  out += "],\"series\":{";
  for (size_t c = 0; c < cols.size(); ++c) {
    out += (c ? "," : "") + json(cols[c].first).dump() + ":[";
    const auto& v = *cols[c].second;
    bool first_value = true;
    for (size_t b = 0; b < buckets; ++b) {
      if (lo[b + 1] == lo[b]) continue;
      size_t imin = SIZE_MAX, imax = SIZE_MAX;
      for (size_t i = lo[b]; i < lo[b + 1]; ++i) {
        if (std::isnan(v[i])) continue;
        if (imin == SIZE_MAX || v[i] < v[imin]) imin = i;
        if (imax == SIZE_MAX || v[i] > v[imax]) imax = i;
      }
      const double a = imin == SIZE_MAX ? NAN : v[std::min(imin, imax)], z = imin == SIZE_MAX ? NAN : v[std::max(imin, imax)];
      if (!first_value) out += ',';
      first_value = false;
      if (slots(b) == 2) append_number(out, a), out += ',', append_number(out, z);
      else append_number(out, v[lo[b]]);
    }
    out += ']';
  }
  out += '}';
}

void append_raw(std::string& out, const std::vector<double>& steps, size_t first,
                const std::vector<std::pair<std::string, const std::vector<float>*>>& cols) {
  out += "\"x\":[";
  for (size_t i = first; i < steps.size(); ++i) {
    if (i > first) out += ',';
    append_number(out, steps[i]);
  }
  out += "],\"series\":{";
  for (size_t c = 0; c < cols.size(); ++c) {
    out += (c ? "," : "") + json(cols[c].first).dump() + ":[";
    const auto& v = *cols[c].second;
    for (size_t i = first; i < v.size(); ++i) {
      if (i > first) out += ',';
      append_number(out, v[i]);
    }
    out += ']';
  }
  out += '}';
}

std::string RunCache::series_json(int64_t since, size_t points, const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_metrics();
  std::vector<std::pair<std::string, const std::vector<float>*>> cols;
  if (keys.empty()) {
    for (const auto& [k, col] : columns_)
      if (cols.size() < kMaxKeysPerReply * 8) cols.emplace_back(k, &col);
  } else {
    for (const auto& k : keys)
      if (auto it = columns_.find(k); it != columns_.end()) cols.emplace_back(k, &it->second);
  }
  const size_t first = static_cast<size_t>(
      std::upper_bound(steps_.begin(), steps_.end(), static_cast<double>(since)) - steps_.begin());
  const size_t end = steps_.size();
  const bool sampled = end - first > points;
  std::string out = "{\"epoch\":" + std::to_string(epoch_) + ",\"rows\":" + std::to_string(end) + ",\"last_step\":";
  append_number(out, steps_.empty() ? -1.0 : steps_.back());
  out += std::string(",\"sampled\":") + (sampled ? "true" : "false") + ",\"keys\":" + [&] {
    json k = json::array();
    for (const auto& [name, col] : columns_) k.push_back(name);
    return k.dump();
  }() + ",";
  if (sampled) append_decimated(out, steps_, first, end, points, cols);
  else append_raw(out, steps_, first, cols);
  out += '}';
  return out;
}

json RunCache::last_row() {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_metrics();
  if (!last_record_.is_object()) return {{"step", 0}, {"last_metrics", nullptr}};
  auto field = [&](const char* k, json fallback) {
    const auto it = last_record_.find(k);
    const bool same = it != last_record_.end() && (fallback.is_number() ? it->is_number() : it->type() == fallback.type());
    return same ? *it : fallback;
  };
  return {{"step", field("step", int64_t(0))},
          {"policy_version", field("policy_version", int64_t(0))},
          {"last_time", field("time", 0.0)},
          {"verdict", field("verdict", "")},
          {"last_metrics", last_record_}};
}

void RunCache::refresh_events() {
  std::error_code ec;
  const uint64_t bytes = fs::file_size(run_.events_path(), ec);
  if (ec) {
    events_.clear();
    events_bytes_ = 0;
    return;
  }
  if (bytes == events_bytes_) return;
  const JsonlChunk chunk = RunFolder::read_jsonl(run_.events_path(), 0, bytes);
  events_.clear();
  int64_t index = 0;
  for (const auto& line : chunk.lines) {
    events_.push_back(line.well_formed() ? line.record : json{{"event", "unreadable"}, {"line", index}});
    ++index;
  }
  events_bytes_ = chunk.next_offset;  // a torn last line is read again once whole
}

json RunCache::events_since(int64_t since) {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_events();
  json out = json::array();
  for (size_t i = static_cast<size_t>(std::max<int64_t>(0, since)); i < events_.size() && out.size() < kMaxEventsPerReply; ++i)
    out.push_back(events_[i]);
  return out;
}

std::string RunCache::event_state() {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_events();
  std::string state = "created";
  for (const auto& e : events_) state = run_state_after(state, e);
  return state;
}

// One cache per run directory in the process, shared by every route that reads it.
std::shared_ptr<RunCache> cache_for(const std::string& dir) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<RunCache>> caches;
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  const std::string key = ec ? dir : canonical.string();
  std::lock_guard<std::mutex> lock(mu);
  if (auto c = caches[key].lock()) return c;
  auto c = std::make_shared<RunCache>(dir);
  caches[key] = c;
  return c;
}

// ---------------------------------------------------------------------------------------------
// The routes

std::string random_instance() {
  std::random_device rd;
  char buf[24];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

// What a verdict asks of the user, in the advisor's own words (throughput_advisor.h owns them).
std::string advice_for(const std::string& verdict) {
  if (verdict == "trainer-bound") return throughput_verdict({{"trainer_idle_frac", 0.0}, {"generation_idle_frac", 1.0}}, 1.0).advice;
  if (verdict == "generation-bound") return throughput_verdict({{"trainer_idle_frac", 1.0}, {"generation_idle_frac", 0.0}}, 0.0).advice;
  if (verdict == "balanced") return throughput_verdict({{"trainer_idle_frac", 0.1}, {"generation_idle_frac", 0.1}}, 0.5).advice;
  return "";
}

class Dashboard {
public:
  explicit Dashboard(DashboardSource s) : source_(std::move(s)), instance_(random_instance()) {
    for (const auto& d : source_.run_dirs) runs_.push_back(cache_for(d));
  }

  RunCache& run(const HttpRequest& req) {
    const int64_t k = req.int_param("run", 0, 0, static_cast<int64_t>(runs_.size()) - 1);
    return *runs_[static_cast<size_t>(k)];
  }

  const std::vector<std::shared_ptr<RunCache>>& runs() const { return runs_; }
  json state();
  json workers();
  json adapters();
  std::string series(const HttpRequest& req);

private:
  json config_of(RunCache& run) {  // read once: a run's resolved config does not change
    std::lock_guard<std::mutex> lock(mu_);
    if (config_.is_null()) {
      try {
        config_ = run.folder().read_config();
      } catch (const std::exception&) {
        config_ = json::object();
      }
    }
    return config_;
  }

  DashboardSource source_;
  std::string instance_;
  std::vector<std::shared_ptr<RunCache>> runs_;
  std::mutex mu_;
  json config_;
  std::map<std::string, std::pair<int64_t, std::chrono::steady_clock::time_point>> worker_tokens_;
  std::map<std::string, double> worker_rates_;
};

json Dashboard::state() {
  RunCache& run = *runs_[0];
  json row = run.last_row();
  const json cfg = config_of(run);
  json s = {{"instance", instance_}, {"live", bool(source_.live_state)}, {"read_only", !source_.live_state},
            {"run_dir", run.folder().root()}, {"config", cfg},
            {"max_steps", source_.max_steps > 0 ? source_.max_steps : json_integer(cfg, "max_steps")}};
  json runs = json::array();
  for (const auto& r : runs_) runs.push_back(r->folder().root());
  s["runs"] = runs;
  const std::string verdict = row.value("verdict", std::string());
  s["verdict"] = verdict;
  s["advice"] = advice_for(verdict);
  s["last_time"] = row.value("last_time", 0.0);
  s["step"] = row.value("step", int64_t(0));
  s["policy_version"] = row.value("policy_version", int64_t(0));
  if (source_.live_state) {
    const json live = source_.live_state();  // a named value: items() of a temporary would dangle
    for (const auto& [k, v] : live.items()) s[k] = v;
  } else {
    s["state"] = run.event_state();
    s["paused"] = s["state"] == "paused";
    const auto versions = run.folder().adapter_versions();
    if (!versions.empty()) s["policy_version"] = versions.back();
  }
  return s;
}

json Dashboard::workers() {
  json out = json::array();
  if (!source_.workers) return out;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& w : source_.workers()) {
    if (out.size() >= 1024) break;  // a table, not a dump
    auto& [tokens, at] = worker_tokens_[w.url];
    const double dt = std::chrono::duration<double>(now - at).count();
    if (dt >= 0.5 && at.time_since_epoch().count() != 0 && w.tokens >= tokens)
      worker_rates_[w.url] = static_cast<double>(w.tokens - tokens) / dt;
    if (dt >= 0.5 || at.time_since_epoch().count() == 0) tokens = w.tokens, at = now;
    out.push_back({{"name", w.name}, {"url", w.url}, {"status", w.status}, {"adapter_version", w.adapter_version},
                   {"inflight", w.inflight}, {"completed", w.completed}, {"tokens", w.tokens},
                   {"tok_s", w.tok_s > 0 ? w.tok_s : worker_rates_[w.url]}, {"affinity", w.affinity},
                   {"last_error", w.last_error}, {"job", w.job}, {"job_state", w.job_state}, {"job_reason", w.job_reason},
                   {"job_node", w.job_node}, {"job_time_left", w.job_time_left}});
  }
  return out;
}

json Dashboard::adapters() {
  const RunFolder& run = runs_[0]->folder();
  json out = json::array();
  for (int64_t v : run.adapter_versions()) {
    json files = json::array();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(run.adapter_dir(v), ec)) {
      std::error_code e2;
      if (!e.is_regular_file(e2) || e.is_symlink(e2)) continue;
      files.push_back({{"name", e.path().filename().string()}, {"bytes", e.file_size(e2)}});
    }
    std::sort(files.begin(), files.end(), [](const json& a, const json& b) { return a["name"] < b["name"]; });
    out.push_back({{"version", v}, {"name", RunFolder::adapter_name(v)}, {"files", files}});
  }
  return out;
}

std::string Dashboard::series(const HttpRequest& req) {
  RunCache& run = this->run(req);
  const int64_t since = req.int_param("since", -1, -1, INT64_MAX);
  const auto points = static_cast<size_t>(req.int_param("points", kDefaultPoints, kMinPoints, kMaxPoints));
  std::vector<std::string> keys;
  if (const auto k = req.query_param("keys"); k && !k->empty()) {
    keys = split(*k, ',');
    if (keys.size() > kMaxKeysPerReply)
      throw HttpError(400, "keys: at most " + std::to_string(kMaxKeysPerReply) + " metric names a request");
  }
  return run.series_json(since, points, keys);
}

// GET /grpo/dashboard/adapter/<N>/<file>: a plain file directly inside adapters/policy-v<N>/.
HttpResponse adapter_file(const RunFolder& run, const std::string& path) {
  const std::string rest = cluster::percent_decode(path.substr(std::string("/grpo/dashboard/adapter/").size()));
  const auto slash = rest.find('/');
  if (slash == std::string::npos) throw HttpError(404, "name a file: /grpo/dashboard/adapter/<version>/<file>", "NotFoundError");
  const std::string num = rest.substr(0, slash), name = rest.substr(slash + 1);
  std::optional<int64_t> version;  // <N>: 1 to 18 digits
  if (!num.empty() && num.size() <= 18 && num.find_first_not_of("0123456789") == std::string::npos)
    version = std::stoll(num);
  const bool plain = std::all_of(name.begin(), name.end(), [](char ch) {  // also safe in Content-Disposition
    return static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f && ch != '/' && ch != '"' && ch != '\\';
  });
  if (!version || name.empty() || name == "." || name == ".." || !plain)
    throw HttpError(404, "no adapter file \"" + rest + "\"", "NotFoundError");
  const fs::path file = fs::path(run.adapter_dir(*version)) / name;
  std::error_code ec;
  const auto st = fs::symlink_status(file, ec);
  if (ec || !fs::is_regular_file(st)) throw HttpError(404, "no adapter file \"" + rest + "\"", "NotFoundError");
  if (fs::file_size(file, ec) > kMaxDownloadBytes) throw HttpError(413, "adapter file \"" + rest + "\" is too large to serve");
  HttpResponse r;
  r.content_type = "application/octet-stream";
  r.body = read_file(file.string());
  r.headers.emplace_back("Content-Disposition", "attachment; filename=\"" + RunFolder::adapter_name(*version) + "-" + name + "\"");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

void add_static_routes(HttpServer& server) {
  for (size_t i = 0; i < web::kAssetCount; ++i) {
    const web::Asset& a = web::kAssets[i];
    auto handler = [&a](const HttpRequest&, Reply reply) {
      HttpResponse r;
      r.content_type = a.type;
      r.body.assign(reinterpret_cast<const char*>(a.data), a.size);
      add_page_headers(r);
      reply.send(std::move(r));
    };
    server.route("GET", a.path, handler, RouteOptions{.public_route = true});
    if (std::string(a.path) == "/index.html") server.route("GET", "/", handler, RouteOptions{.public_route = true});
  }
}

// A handler run on the server's pool, its JSON sent back with no-store.
template <class F>
void get_json(HttpServer& server, const std::string& path, F f) {
  server.route("GET", path, [f](const HttpRequest& req, Reply reply) { reply.send(json_reply(f(req))); },
               RouteOptions{.blocking = true});
}

}  // namespace

void add_dashboard_routes(HttpServer& server, DashboardSource source) {
  check(!source.run_dirs.empty(), "dashboard", "no run directory given");
  auto run0 = cache_for(source.run_dirs[0]);
  const nlohmann::json schema = std::move(source.config_schema);
  auto d = std::make_shared<Dashboard>(std::move(source));
  // Read the runs' files now, in the background, so that the first page to open does not wait for
  // a long run's metrics to be parsed (about 20 MB/s here). The thread holds the caches it fills.
  std::thread([runs = d->runs()] {
    for (const auto& r : runs) {
      try {
        r->last_row();
      } catch (const std::exception&) {
        // the routes report it when asked
      }
    }
  }).detach();
  add_static_routes(server);
  get_json(server, "/grpo/dashboard/state", [d](const HttpRequest&) { return d->state(); });
  server.route("GET", "/grpo/dashboard/series", [d](const HttpRequest& req, Reply reply) {
    HttpResponse r;
    r.body = d->series(req);
    r.headers.emplace_back("Cache-Control", "no-store");
    reply.send(std::move(r));
  }, RouteOptions{.blocking = true});
  get_json(server, "/grpo/dashboard/samples", [d](const HttpRequest& req) {
    const auto limit = static_cast<size_t>(req.int_param("limit", 50, 1, kMaxSamples));
    return json(d->run(req).folder().read_samples(limit));
  });
  get_json(server, "/grpo/dashboard/workers", [d](const HttpRequest&) { return d->workers(); });
  get_json(server, "/grpo/dashboard/adapters", [d](const HttpRequest&) { return d->adapters(); });
  get_json(server, "/grpo/config/schema", [schema](const HttpRequest&) { return schema; });
  get_json(server, "/grpo/dashboard/charts", [](const HttpRequest&) { return chart_catalogue_json(); });
  get_json(server, "/grpo/dashboard/metrics", [](const HttpRequest&) { return metric_catalogue_json(); });
  get_json(server, "/grpo/dashboard/event-kinds", [](const HttpRequest&) { return event_catalogue_json(); });
  server.route("GET", "/grpo/dashboard/adapter/*", [run0](const HttpRequest& req, Reply reply) {
    reply.send(adapter_file(run0->folder(), req.path));
  }, RouteOptions{.blocking = true});
}

void add_run_folder_routes(HttpServer& server, const std::string& run_dir) {
  auto run = cache_for(run_dir);
  get_json(server, "/grpo/run", [run](const HttpRequest&) {
    json row = run->last_row();
    const std::string state = run->event_state();
    int64_t max_steps = 0;
    try {
      max_steps = json_integer(run->folder().read_config(), "max_steps");
    } catch (const std::exception&) {
    }
    const auto versions = run->folder().adapter_versions();
    return json{{"state", state}, {"step", row["step"]}, {"max_steps", max_steps},
                {"policy_version", versions.empty() ? 0 : versions.back()}, {"run_dir", run->folder().root()},
                {"paused", state == "paused"}, {"last_metrics", row["last_metrics"]}};
  });
  get_json(server, "/grpo/metrics", [run](const HttpRequest& req) {
    const int64_t since = req.int_param("since", -1);
    json out = json::array();
    for (auto& r : run->folder().metrics_since(since)) {
      if (out.size() >= kMaxMetricsPerReply) break;
      out.push_back(std::move(r));
    }
    return out;
  });
  get_json(server, "/grpo/events", [run](const HttpRequest& req) {
    return run->events_since(req.int_param("since", 0));
  });
}

std::string dashboard_url(const std::string& server_url, const std::string& token) {
  return server_url + "/#token=" + token;
}

}  // namespace grpo::run
