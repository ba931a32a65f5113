// Router: dispatch, re-dispatch, all-or-nothing adapter broadcast and worker rejoin, all driven
// by QNetworkAccessManager callbacks in one thread.
#include "core/cluster/router.h"

#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <deque>
#include <utility>

#include "core/common/error.h"
#include "core/common/log.h"
#include "core/common/timing.h"

namespace grpo::cluster {
namespace {

double now_s() { return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count(); }

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// A load refused because this worker cannot see or read the bucket (its --bucket is elsewhere or
// missing, or the files are not readable to it), not because the adapter is bad.
bool is_bucket_fault(const std::string& why) {
  return contains(why, "outside this worker's bucket") || contains(why, "without --bucket") ||
         contains(why, "cannot read");
}

}  // namespace

nlohmann::json RouterAccounting::to_json() const {
  return {{"requests", requests}, {"dispatched", dispatched}, {"completed", completed},
          {"redispatched", redispatched}, {"rejected", rejected}, {"cancelled", cancelled}, {"abandoned", abandoned}, {"withdrawn", withdrawn}};
}

struct Router::Worker {
  int id = 0;
  std::string url;
  std::unique_ptr<WorkerClient> client;          // control calls (lane 0)
  std::vector<std::unique_ptr<WorkerClient>> lanes;  // completions, round robin
  size_t next_lane = 0;
  enum State { Joining, Up, Out } state = Joining;
  bool removed = false;      // dropped by remove_worker(): never probed again
  bool probing = false;
  bool distrusted = false;   // answered with the wrong weights: reload every adapter on rejoin
  uint64_t epoch = 0;        // bumped each time the worker is taken out (stale callbacks ignore themselves)
  int64_t inflight = 0, completed = 0;
  bool draining = false, paused = false;        // operator commands: no new requests
  int64_t dispatched = 0, affinity_hits = 0, tokens = 0;
  std::string adapter;                          // the newest live one it holds (view, under mu_)
  double next_probe = 0, backoff = 0;
  std::string last_error;
  std::map<std::string, std::string> loaded;  // adapter name -> path it was loaded from
  int strikes = 0;            // times quarantined
  bool quarantined = false;   // out for garbage or wrong weights (its _cleared event on rejoin)
  bool bucket_fault = false;  // could not read the bucket (its _cleared event on rejoin)
};

// One complete() call: its requests and their state.
struct Router::Batch {
  struct Job {
    CompletionRequest req;
    CompletionOutcome out;
    bool done = false;
    double deadline = 0;  // streamed jobs: given up at this time (now_s clock)
    int worker = -1;
    uint64_t epoch = 0;  // the worker's incarnation it was sent to
    QNetworkReply* reply = nullptr;
  };
  std::map<size_t, Job> jobs;   // by id; a streamed job is erased once poll() returned it
  std::deque<size_t> pending;
  size_t remaining = 0;
  bool closed = false;
  QEventLoop* loop = nullptr;
  bool streaming = false;       // submit()/poll(): finished jobs are collected, not awaited all
  std::vector<size_t> finished;
  size_t next_id = 0;
};

Router::Router(RouterOptions options, EventFn on_event)
    : opts_(std::move(options)), on_event_(std::move(on_event)), prefix_(16, opts_.imbalance) {}

Router::~Router() {
  if (!stream_) return;
  stream_->closed = true;  // callbacks of replies aborted now return at once
  for (auto& [id, j] : stream_->jobs)
    if (j.reply) {
      QNetworkReply* r = j.reply;
      j.reply = nullptr;
      r->abort();
    }
}

namespace {
constexpr size_t kLanes = 4;  // 4 x 6 connections per worker
}

QNetworkAccessManager& Router::nam(size_t lane) {
  if (nams_.empty()) {
    for (size_t i = 0; i < kLanes; ++i) nams_.push_back(std::make_unique<QNetworkAccessManager>());
    owner_ = std::this_thread::get_id();
  }
  check(owner_ == std::this_thread::get_id(), "router", "used from two threads",
        "call the Router from the thread that first used it");
  return *nams_[lane % nams_.size()];
}

Router::Worker* Router::find(int id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : it->second.get();
}

void Router::emit_event(nlohmann::json e) {
  if (on_event_) on_event_(e);
}

void Router::add_worker(const std::string& url) {
  auto& manager = nam();
  std::unique_lock<std::mutex> lock(mu_);
  for (auto& [id, w] : workers_) {
    if (w->url == url || w->client->url() == url) {
      if (w->removed) {  // announced again after discovery forgot it
        w->removed = false;
        w->next_probe = 0;
      }
      return;
    }
  }
  auto w = std::make_unique<Worker>();
  w->id = next_id_++;
  w->client = std::make_unique<WorkerClient>(&manager, url, opts_.token, opts_.tls_pins);
  for (size_t i = 0; i < kLanes; ++i)
    w->lanes.push_back(std::make_unique<WorkerClient>(&nam(i), url, opts_.token, opts_.tls_pins));
  w->url = w->client->url();
  workers_[w->id] = std::move(w);
}

void Router::remove_worker(const std::string& url, const std::string& reason) {
  for (auto& [id, w] : workers_) {
    if (w->url != url || w->removed) continue;
    take_out(*w, reason);
    w->removed = true;
  }
}

void Router::request(WorkerCommand c) {
  std::lock_guard<std::mutex> lock(commands_mu_);
  commands_.push_back(std::move(c));
}

void Router::apply_commands() {
  std::vector<WorkerCommand> cmds;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    cmds.swap(commands_);
  }
  for (const auto& c : cmds) {
    if (c.kind == WorkerCommand::Add) add_worker(c.url);
    if (c.kind == WorkerCommand::Remove) remove_worker(c.url, "removed by the operator");
    if (c.kind == WorkerCommand::Add || c.kind == WorkerCommand::Remove) continue;
    for (auto& [id, w] : workers_) {
      if (w->url != c.url || w->removed) continue;
      const bool was_paused = w->paused;
      {
        std::lock_guard<std::mutex> lock(mu_);
        w->draining = c.kind == WorkerCommand::Drain || (w->draining && c.kind == WorkerCommand::Pause);
        w->paused = c.kind == WorkerCommand::Pause;
      }
      // The worker itself finishes what it has and holds the rest (vLLM's mode=wait) until /resume.
      const std::string route = c.kind == WorkerCommand::Pause ? "/pause?mode=wait"
                                : c.kind == WorkerCommand::Resume && was_paused ? "/resume" : "";
      if (!route.empty())
        w->client->post(route, nlohmann::json::object(), opts_.request_timeout_s, [this, id = id, route](const HttpResult& r) {
          std::lock_guard<std::mutex> lock(mu_);
          if (!r.ok()) find(id)->last_error = route + ": " + r.describe();
        });
      const char* kind = c.kind == WorkerCommand::Drain ? "worker_draining"
                         : c.kind == WorkerCommand::Pause ? "worker_paused" : "worker_resumed";
      emit_event({{"event", kind}, {"url", w->url}, {"message", std::string(kind + 7) + " by the operator: " + w->url}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, w] : workers_) {
    const Adapter* newest = nullptr;
    for (const auto& [name, path] : w->loaded) {
      auto it = live_.find(name);
      if (it != live_.end() && (!newest || it->second.order > newest->order)) newest = &it->second;
    }
    w->adapter = newest ? newest->name : "";
  }
}

void Router::take_out(Worker& w, const std::string& reason) {
  w.last_error = reason;
  const bool was_up = w.state == Worker::Up;
  {
    std::lock_guard<std::mutex> lock(mu_);
    w.state = Worker::Out;
    ++w.epoch;
    w.loaded.clear();  // what it holds is re-checked through /v1/models when it rejoins
  }
  w.backoff = opts_.probe_min_s;
  w.next_probe = now_s() + w.backoff;
  prefix_.forget_worker(w.id);
  if (was_up) {
    log_warn("worker " + w.url + " taken out: " + reason);
    emit_event({{"event", "worker_left"}, {"url", w.url}, {"reason", reason}, {"severity", "warning"},
                {"message", "worker " + w.url + " taken out: " + reason},
                {"advice", "its requests went to the other workers; it is probed again and rejoins by itself once "
                           "it answers (check that it still runs and is reachable)"}});
  }
}

void Router::quarantine(Worker& w, const std::string& reason) {
  take_out(w, reason);
  const double hold = std::min(600.0, opts_.quarantine_s * double(int64_t(1) << std::min(w.strikes, 10)));
  ++w.strikes;
  w.quarantined = true;
  w.next_probe = now_s() + hold;
  emit_event({{"event", "worker_quarantined"}, {"url", w.url}, {"reason", reason}, {"severity", "error"},
              {"message", "worker " + w.url + " quarantined for " + std::to_string(int64_t(hold)) + " s: " + reason},
              {"advice", "its answers were discarded and sent elsewhere; check that the worker runs the same "
                         "base model and grpo/vLLM version as the trainer and reads the same bucket, or remove it"}});
}

void Router::bucket_unreadable(Worker& w, const std::string& why) {
  w.last_error = why;
  if (w.bucket_fault) return;
  w.bucket_fault = true;
  log_warn("worker " + w.url + " cannot read the bucket: " + why);
  emit_event({{"event", "bucket_unreadable"}, {"url", w.url}, {"severity", "warning"},
              {"message", "worker " + w.url + " cannot read the adapter from the bucket: " + why},
              {"advice", "give that worker the trainer's bucket at the same path (--bucket) and make it readable "
                         "there; meanwhile the other workers carry the run"}});
}

// ---------------------------------------------------------------- joining

void Router::kick_probes(bool force) {
  apply_commands();
  const double t = now_s();
  for (auto& [id, w] : workers_)
    if (!w->removed && !w->probing && w->state != Worker::Up && (force || t >= w->next_probe)) probe(id);
}

void Router::probe(int id) {
  Worker* w = find(id);
  w->probing = true;
  const uint64_t epoch = w->epoch;
  w->client->get("/health", opts_.health_timeout_s, [this, id, epoch](const HttpResult& h) {
    Worker* w = find(id);
    if (!h.ok()) return probe_done(id, epoch, false, "/health: " + h.describe());
    w->client->get("/v1/models", opts_.health_timeout_s, [this, id, epoch](const HttpResult& m) {
      Worker* w = find(id);
      if (!m.ok()) return probe_done(id, epoch, false, "/v1/models: " + m.describe());
      nlohmann::json j = nlohmann::json::parse(m.body, nullptr, false);
      if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty())
        return probe_done(id, epoch, false, "/v1/models: no data[] list");
      std::map<std::string, std::string> loaded;
      std::string base;
      for (const auto& e : j["data"]) {
        if (!e.is_object() || !e.contains("id") || !e["id"].is_string()) continue;
        const bool is_lora = e.contains("parent") && e["parent"].is_string() && !e["parent"].get<std::string>().empty();
        if (is_lora) loaded[e["id"].get<std::string>()] = e.value("root", std::string());
        else if (base.empty()) base = e["id"].get<std::string>();
      }
      if (!base.empty()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (base_model_.empty()) base_model_ = base;
      }
      // Names we do not serve (an older run on a reused worker), or ours from another path, go.
      std::vector<Adapter> todo;
      for (const auto& [name, root] : loaded) {
        auto it = live_.find(name);
        if (it == live_.end() || (!root.empty() && root != it->second.path)) {
          w->client->post("/v1/unload_lora_adapter", {{"lora_name", name}}, opts_.health_timeout_s, [](const HttpResult&) {});
          loaded.erase(name);
          break;  // one per probe round (the iterator is gone); the next probe sweeps the rest
        }
      }
      if (w->distrusted) {
        // Its copies gave the wrong weights: drop them all, then probe again as a clean worker.
        std::vector<std::string> names;
        for (const auto& [name, root] : loaded) names.push_back(name);
        return unload_then_reprobe(id, epoch, std::move(names));
      }
      w->loaded = loaded;
      for (const auto& [name, a] : live_)
        if (!w->loaded.count(name)) todo.push_back(a);
      // The newest live version is required (it is what requests name); older ones may already
      // have left the bucket, so they are loaded best effort, once each.
      std::sort(todo.begin(), todo.end(), [](const Adapter& a, const Adapter& b) { return a.order > b.order; });
      std::vector<Adapter> older;
      if (todo.size() > 1) older.assign(todo.begin() + 1, todo.end());
      todo.resize(std::min<size_t>(todo.size(), 1));
      load_on(id, epoch, todo, now_s() + opts_.load_timeout_s,
              [this, id, epoch, older = std::move(older)](bool ok, std::string why) mutable {
                if (!ok) return probe_done(id, epoch, false, why);
                load_best_effort(id, epoch, std::move(older));
              });
    });
  });
}

void Router::probe_done(int id, uint64_t epoch, bool ok, const std::string& why) {
  Worker* w = find(id);
  w->probing = false;
  if (w->epoch != epoch || w->removed) return;
  if (!ok) {
    if (is_bucket_fault(why)) bucket_unreadable(*w, why);
    w->last_error = why;
    w->backoff = std::min(opts_.probe_max_s, std::max(opts_.probe_min_s, w->backoff * 2));
    w->next_probe = now_s() + w->backoff;
    return;
  }
  // An adapter made live while this probe ran is loaded before the worker takes requests.
  // (Only the newest one matters: requests name the newest version.)
  std::vector<Adapter> missing;
  const Adapter* newest = nullptr;
  for (const auto& [name, a] : live_)
    if (!newest || a.order > newest->order) newest = &a;
  if (newest && !w->loaded.count(newest->name)) missing.push_back(*newest);
  if (!missing.empty()) {
    w->probing = true;
    return load_on(id, epoch, missing, now_s() + opts_.load_timeout_s,
                   [this, id, epoch](bool ok2, std::string why2) { probe_done(id, epoch, ok2, why2); });
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    w->state = Worker::Up;
  }
  w->backoff = 0;
  log_info("worker " + w->url + " joined");
  emit_event({{"event", "worker_joined"}, {"url", w->url}, {"adapters", w->loaded.size()}});
  for (auto [flag, kind] : {std::pair{&w->quarantined, "worker_quarantined_cleared"},
                            std::pair{&w->bucket_fault, "bucket_unreadable_cleared"}})
    if (std::exchange(*flag, false))
      emit_event({{"event", kind}, {"url", w->url}, {"message", "worker " + w->url + " rejoined and loaded the live adapter"}});
}

void Router::unload_then_reprobe(int id, uint64_t epoch, std::vector<std::string> names) {
  Worker* w = find(id);
  if (w->epoch != epoch) return probe_done(id, epoch, false, "taken out during the probe");
  if (names.empty()) {
    w->distrusted = false;
    w->loaded.clear();
    return probe(id);
  }
  const std::string name = names.back();
  names.pop_back();
  w->client->post("/v1/unload_lora_adapter", {{"lora_name", name}}, opts_.health_timeout_s,
                  [this, id, epoch, names = std::move(names)](const HttpResult&) mutable {
                    unload_then_reprobe(id, epoch, std::move(names));
                  });
}

void Router::load_best_effort(int id, uint64_t epoch, std::vector<Adapter> todo) {
  if (todo.empty()) return probe_done(id, epoch, true, "");
  const Adapter a = todo.back();
  todo.pop_back();
  // deadline = now: "No adapter found" is not retried here.
  load_on(id, epoch, {a}, now_s(), [this, id, epoch, todo = std::move(todo)](bool, std::string) mutable {
    load_best_effort(id, epoch, std::move(todo));
  });
}

// Loads `todo` on one worker in order, retrying "No adapter found" until `deadline`.
void Router::load_on(int id, uint64_t epoch, std::vector<Adapter> todo, double deadline,
                     std::function<void(bool, std::string)> done) {
  if (todo.empty()) return done(true, "");
  Worker* w = find(id);
  const Adapter a = todo.front();
  const nlohmann::json body = {{"lora_name", a.name}, {"lora_path", a.path}};
  w->client->post("/v1/load_lora_adapter", body, opts_.request_timeout_s,
                  [this, id, epoch, todo = std::move(todo), deadline, done = std::move(done), a](const HttpResult& r) mutable {
    Worker* w = find(id);
    if (w->epoch != epoch) return done(false, "taken out during the load");
    if (r.ok()) {
      w->loaded[a.name] = a.path;
      todo.erase(todo.begin());
      return load_on(id, epoch, std::move(todo), deadline, std::move(done));
    }
    if (r.status != 0 && contains(r.body, "No adapter found") && now_s() < deadline) {
      QTimer::singleShot(static_cast<int>(opts_.load_retry_s * 1000), &nam(),
                         [this, id, epoch, todo = std::move(todo), deadline, done = std::move(done)]() mutable {
                           load_on(id, epoch, std::move(todo), deadline, std::move(done));
                         });
      return;
    }
    done(false, "load_lora_adapter " + a.name + ": " + r.describe());
  });
}

int Router::wait_for_workers(int min_up, double timeout_s) {
  nam();
  kick_probes(true);
  const double deadline = now_s() + timeout_s;
  QEventLoop loop;
  QTimer tick;
  tick.setInterval(50);
  QObject::connect(&tick, &QTimer::timeout, &loop, [&] {
    if (workers_up() >= min_up || now_s() >= deadline) loop.quit();
    else kick_probes(false);
  });
  tick.start();
  if (workers_up() < min_up) loop.exec();
  return workers_up();
}

// ---------------------------------------------------------------- completions

std::vector<CompletionOutcome> Router::complete(const std::vector<CompletionRequest>& requests, double deadline_s) {
  nam();
  auto b = std::make_shared<Batch>();
  for (size_t i = 0; i < requests.size(); ++i) {
    b->jobs[i].req = requests[i];
    b->pending.push_back(i);
  }
  b->remaining = requests.size();
  {
    std::lock_guard<std::mutex> lock(mu_);
    acc_.requests += static_cast<int64_t>(requests.size());
  }
  QEventLoop loop;
  b->loop = &loop;
  const double deadline = now_s() + deadline_s;
  QTimer tick;
  tick.setInterval(100);
  QObject::connect(&tick, &QTimer::timeout, &loop, [&] {
    kick_probes(false);  // returning workers join while the batch runs
    dispatch(b);
    if (now_s() >= deadline) loop.quit();
  });
  kick_probes(false);
  dispatch(b);
  if (b->remaining > 0) {
    tick.start();
    loop.exec();
  }
  // Deadline: whatever is still out is cancelled and given up.
  b->closed = true;
  b->loop = nullptr;
  for (auto& [id, j] : b->jobs) {
    if (j.done) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (j.reply) {
      ++acc_.cancelled;
      if (Worker* w = find(j.worker)) --w->inflight;
      QNetworkReply* r = j.reply;
      j.reply = nullptr;
      r->abort();  // its callback sees b->closed and returns
    }
    ++acc_.abandoned;
    j.out.error = j.out.error.empty() ? "no worker answered before the deadline" : j.out.error;
  }
  std::vector<CompletionOutcome> out;
  for (auto& [id, j] : b->jobs) out.push_back(std::move(j.out));
  return out;
}

uint64_t Router::submit(const CompletionRequest& request, double deadline_s) {
  nam();
  if (!stream_) {
    stream_ = std::make_shared<Batch>();
    stream_->streaming = true;
  }
  const size_t id = stream_->next_id++;
  auto& j = stream_->jobs[id];
  j.req = request;
  j.deadline = now_s() + deadline_s;
  stream_->pending.push_back(id);
  ++stream_->remaining;
  std::lock_guard<std::mutex> lock(mu_);
  ++acc_.requests;
  return id;
}

size_t Router::unfinished() const { return stream_ ? stream_->jobs.size() : 0; }

void Router::finish(Batch& b, size_t job) {
  b.jobs[job].done = true;
  --b.remaining;
  if (b.streaming) b.finished.push_back(job);
}

void Router::give_up(Batch& b, size_t job, const std::string& why, bool withdrawn) {
  auto& j = b.jobs[job];
  if (j.done) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (j.reply) {
      ++acc_.cancelled;
      if (Worker* w = find(j.worker)) --w->inflight;
    }
    ++(withdrawn ? acc_.withdrawn : acc_.abandoned);
  }
  b.pending.erase(std::remove(b.pending.begin(), b.pending.end(), job), b.pending.end());
  j.out.error = j.out.error.empty() ? why : why + " (last: " + j.out.error + ")";
  finish(b, job);  // before the abort: its callback then sees a finished job and returns
  if (QNetworkReply* r = j.reply) {
    j.reply = nullptr;
    r->abort();
  }
  if (b.loop && (b.remaining == 0 || b.streaming)) b.loop->quit();
}

void Router::cancel_stream(const std::string& why) {
  if (!stream_) return;
  for (auto& [id, j] : stream_->jobs)
    if (!j.done) give_up(*stream_, id, why, /*withdrawn=*/true);
}

std::vector<std::pair<uint64_t, CompletionOutcome>> Router::poll(double wait_s) {
  std::vector<std::pair<uint64_t, CompletionOutcome>> out;
  if (!stream_) return out;
  auto b = stream_;
  auto expire = [this, b] {
    const double t = now_s();
    std::vector<size_t> late;
    for (const auto& [id, j] : b->jobs)
      if (!j.done && t >= j.deadline) late.push_back(id);
    for (size_t id : late) give_up(*b, id, "no worker answered before the deadline");
  };
  kick_probes(false);
  dispatch(b);
  expire();
  if (b->finished.empty() && b->remaining > 0 && wait_s > 0) {
    QEventLoop loop;
    b->loop = &loop;
    const double until = now_s() + wait_s;
    QTimer tick;
    tick.setInterval(static_cast<int>(std::clamp(wait_s * 1000.0, 1.0, 100.0)));
    QObject::connect(&tick, &QTimer::timeout, &loop, [&] {
      kick_probes(false);  // returning workers join while requests are out
      dispatch(b);
      expire();
      if (!b->finished.empty() || now_s() >= until) loop.quit();
    });
    tick.start();
    loop.exec();
    b->loop = nullptr;
  }
  for (size_t id : b->finished) {
    auto it = b->jobs.find(id);
    out.emplace_back(id, std::move(it->second.out));
    b->jobs.erase(it);
  }
  b->finished.clear();
  return out;
}

void Router::dispatch(const std::shared_ptr<Batch>& b) {
  while (!b->pending.empty() && !b->closed) {
    std::vector<RouteCandidate> cands;
    for (auto& [id, w] : workers_)
      if (w->state == Worker::Up && !w->removed && !w->draining && !w->paused) cands.push_back({id, w->inflight});
    if (cands.empty()) return;  // the tick retries once a worker is back
    const size_t job = b->pending.front();
    b->pending.pop_front();
    auto& j = b->jobs[job];
    if (retired_.count(j.req.model)) {  // its version left the staleness window while it waited
      give_up(*b, job, "adapter " + j.req.model + " was unloaded (too stale)");
      continue;
    }
    const int64_t hits = prefix_.stats().affinity;
    const int id = prefix_.choose(cands, j.req.model, j.req.prompt);
    Worker* w = find(id);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++w->inflight;
      ++w->dispatched;
      w->affinity_hits += prefix_.stats().affinity > hits ? 1 : 0;
      ++acc_.dispatched;
    }
    ++j.out.attempts;
    j.worker = id;
    j.epoch = w->epoch;
    j.out.worker = w->url;
    auto& lane = *w->lanes[w->next_lane++ % w->lanes.size()];
    j.reply = lane.post("/v1/completions", completion_request_json(j.req), opts_.request_timeout_s,
                              [this, b, job, id](const HttpResult& r) { on_answer(b, job, id, r); });
  }
}

void Router::on_answer(const std::shared_ptr<Batch>& b, size_t job, int worker_id, const HttpResult& r) {
  if (b->closed) return;  // counted as cancelled when the batch closed
  auto found = b->jobs.find(job);
  if (found == b->jobs.end() || found->second.done) return;  // given up meanwhile (counted there)
  auto& j = found->second;
  j.reply = nullptr;
  Worker* w = find(worker_id);
  std::unique_lock<std::mutex> lock(mu_);
  --w->inflight;
  lock.unlock();
  std::string fault;   // the worker misbehaved: take it out, send the request elsewhere
  std::string reject;  // the request itself was refused: give it up
  CompletionResponse resp;
  bool wrong_weights = false;  // answered for another adapter or with other weights
  const bool misbehaved = r.ok();  // a fault in a 200 answer: garbage, wrong shapes or weights
  if (r.ok()) {
    try {
      resp = parse_completion_response(r.body, w->url);
      if (resp.model != j.req.model)
        fault = "answered with model '" + resp.model + "' for a request for '" + j.req.model + "'";
      auto it = live_.find(j.req.model);
      if (fault.empty() && it != live_.end() && !it->second.sha256.empty() && !resp.adapter_sha256.empty() &&
          resp.adapter_sha256 != it->second.sha256)
        fault = "answered " + j.req.model + " with weights " + resp.adapter_sha256.substr(0, 12) + ", expected " +
                it->second.sha256.substr(0, 12);
      wrong_weights = !fault.empty();
      if (fault.empty() && static_cast<int64_t>(resp.choices.size()) != j.req.n)
        fault = "answered " + std::to_string(resp.choices.size()) + " choices for n=" + std::to_string(j.req.n);
      for (const auto& ch : resp.choices) {  // ids the model has, log-probabilities that are ones
        for (size_t t = 0; t < ch.token_ids.size() && fault.empty(); ++t)
          if (ch.token_ids[t] < 0 || (opts_.vocab_size > 0 && ch.token_ids[t] >= opts_.vocab_size))
            fault = "answered token id " + std::to_string(ch.token_ids[t]) + ", outside the vocabulary [0, " +
                    std::to_string(opts_.vocab_size) + ")";
          else if (std::isnan(ch.logprobs[t]) || ch.logprobs[t] > 1e-3)
            fault = "answered log-probability " + std::to_string(ch.logprobs[t]) + " (must be <= 0)";
      }
    } catch (const Error& e) {
      fault = e.what();
    }
  } else if (r.status == 404 && retired_.count(j.req.model)) {
    reject = "adapter " + j.req.model + " was unloaded (too stale) while the request was out";
  } else if (r.status == 0 || r.status >= 500 || r.status == 404 || r.status == 401 || r.status == 408) {
    // Unreachable, hung, broken, not serving this adapter (404) or not sharing our token (401).
    fault = "/v1/completions: " + r.describe();
  } else {
    reject = w->url + ": /v1/completions: " + r.describe();
  }
  if (fault.empty() && reject.empty()) {
    {
      std::lock_guard<std::mutex> g(mu_);
      ++acc_.completed;
      ++w->completed;
      w->tokens += resp.completion_tokens;
    }
    j.out.ok = true;
    j.out.response = std::move(resp);
    finish(*b, job);
  } else if (!fault.empty()) {
    // Take the worker out only for a fault of its current incarnation (not a late answer from
    // before it was taken out and came back).
    if (w->state == Worker::Up && w->epoch == j.epoch) {
      w->distrusted = w->distrusted || wrong_weights;
      if (misbehaved) quarantine(*w, fault);
      else take_out(*w, fault);
      // A hung worker's other requests in flight would each wait for their own timeout: abort
      // them (from the event loop, not from here) so they go elsewhere now. After a refused or
      // reset connection they fail on their own, and aborting those confuses QNetworkReply.
      for (auto& [other_id, other] : b->jobs)
        if (r.timed_out && !other.done && other.worker == worker_id && other.epoch == j.epoch && other.reply)
          QMetaObject::invokeMethod(
              other.reply, [reply = other.reply] { if (reply->isRunning()) reply->abort(); }, Qt::QueuedConnection);
    }
    j.out.error = w->url + ": " + fault;
    if (j.out.attempts < opts_.max_attempts) {
      std::lock_guard<std::mutex> g(mu_);
      ++acc_.redispatched;
      b->pending.push_back(job);
    } else {
      std::lock_guard<std::mutex> g(mu_);
      ++acc_.rejected;
      ++acc_.abandoned;
      finish(*b, job);
    }
  } else {
    std::lock_guard<std::mutex> g(mu_);
    ++acc_.rejected;
    ++acc_.abandoned;
    j.out.error = reject;
    finish(*b, job);
  }
  if (b->loop && (b->remaining == 0 || !b->finished.empty())) b->loop->quit();
  if (b->remaining == 0) return;
  dispatch(b);
}

// ---------------------------------------------------------------- broadcasts

void Router::load_adapter(const std::string& name, const std::string& path, const std::string& sha256) {
  nam();
  Adapter a{name, path, sha256, ++adapter_order_};
  std::vector<int> targets;
  for (auto& [id, w] : workers_)
    if (w->state == Worker::Up && !w->removed) targets.push_back(id);
  struct Result { int id; uint64_t epoch; bool ok; std::string why; };
  std::vector<Result> results;
  QEventLoop loop;
  size_t left = targets.size();
  const double deadline = now_s() + opts_.load_timeout_s;
  live_[name] = a;  // a worker that joins meanwhile loads it too
  for (int id : targets) {
    const uint64_t epoch = find(id)->epoch;
    load_on(id, epoch, {a}, deadline, [&, id, epoch](bool ok, std::string why) {
      results.push_back({id, epoch, ok, why});
      if (--left == 0) loop.quit();
    });
  }
  if (left > 0) loop.exec();
  std::vector<Result> failed, accepted;
  for (auto& r : results) {
    Worker* w = find(r.id);
    if (r.ok) accepted.push_back(r);
    else if (w->epoch != r.epoch) continue;  // taken out meanwhile: it loads the live set on rejoin
    else if (contains(r.why, ": HTTP ") || contains(r.why, "No adapter found")) failed.push_back(r);
    else take_out(*w, r.why);  // unreachable or timed out: a dead worker, not a bad adapter
  }
  // Workers that cannot read the bucket while others loaded the adapter: the adapter is fine,
  // those workers are not. Take them out (they retry on their probes) instead of failing the load.
  if (!failed.empty() && !accepted.empty() &&
      std::all_of(failed.begin(), failed.end(), [](const Result& r) { return is_bucket_fault(r.why); })) {
    for (auto& r : failed) {
      Worker* w = find(r.id);
      bucket_unreadable(*w, r.why);
      take_out(*w, r.why);
    }
    failed.clear();
  }
  if (!failed.empty()) {
    live_.erase(name);
    // All or nothing: a policy name only some workers can serve would route rollouts to the wrong
    // weights. Roll back where it was accepted.
    for (auto& r : accepted) {
      Worker* w = find(r.id);
      w->loaded.erase(name);
      w->client->post_sync("/v1/unload_lora_adapter", {{"lora_name", name}}, opts_.health_timeout_s);
    }
    const Worker* w = find(failed.front().id);
    emit_event({{"event", "adapter_load_failed"}, {"adapter", name}, {"url", w->url}, {"severity", "error"},
                {"message", w->url + ": loading " + name + " failed: " + failed.front().why},
                {"advice", "the workers keep the previous version; check the worker's log, its --bucket and "
                           "--max-lora-rank"}});
    throw Error(w->url, std::to_string(failed.size()) + "/" + std::to_string(targets.size()) +
                            " workers failed to load " + name + "; rolled back on the others. First: " +
                            failed.front().why,
                contains(failed.front().why, "No adapter found")
                    ? "the worker's bucket mount never showed " + path + " (is --bucket the same directory?)"
                    : "");
  }
}

void Router::unload_adapter(const std::string& name) {
  nam();
  live_.erase(name);
  retired_.insert(name);
  QEventLoop loop;
  size_t left = 0;
  for (auto& [id, w] : workers_) {
    if (w->state != Worker::Up || !w->loaded.count(name)) continue;
    w->loaded.erase(name);
    ++left;
    w->client->post("/v1/unload_lora_adapter", {{"lora_name", name}}, opts_.health_timeout_s, [&](const HttpResult&) {
      if (--left == 0) loop.quit();
    });
  }
  if (left > 0) loop.exec();
}

int Router::broadcast(const std::string& path, const nlohmann::json& body) {
  nam();
  QEventLoop loop;
  size_t left = 0;
  int ok = 0;
  for (auto& [id, w] : workers_) {
    if (w->state != Worker::Up) continue;
    ++left;
    w->client->post(path, body, opts_.health_timeout_s, [&](const HttpResult& r) {
      ok += r.ok() ? 1 : 0;
      if (--left == 0) loop.quit();
    });
  }
  if (left > 0) loop.exec();
  return ok;
}

int Router::pause_all() { return broadcast("/pause?mode=keep", nlohmann::json::object()); }
int Router::resume_all() { return broadcast("/resume", nlohmann::json::object()); }

// ---------------------------------------------------------------- views

std::string Router::base_model() const {
  std::lock_guard<std::mutex> lock(mu_);
  return base_model_;
}

RouterAccounting Router::accounting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return acc_;
}

PrefixRouterStats Router::routing_stats() const { return prefix_.stats(); }

std::vector<WorkerStatus> Router::workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkerStatus> out;
  for (const auto& [id, w] : workers_) {
    if (w->removed) continue;
    const char* state = w->state == Worker::Out ? "out" : w->state == Worker::Joining ? "joining"
                        : w->paused ? "paused" : w->draining ? "draining" : "up";
    out.push_back({id, w->url, state, w->inflight, w->completed, w->last_error, w->adapter, w->dispatched,
                   w->affinity_hits, w->tokens});
  }
  return out;
}

int Router::workers_up() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& [id, w] : workers_) n += (w->state == Worker::Up && !w->removed && !w->draining && !w->paused) ? 1 : 0;
  return n;
}

std::vector<std::string> Router::live_adapters() const {
  std::vector<std::pair<int64_t, std::string>> v;
  for (const auto& [name, a] : live_) v.emplace_back(a.order, name);
  std::sort(v.begin(), v.end());
  std::vector<std::string> out;
  for (auto& [o, n] : v) out.push_back(n);
  return out;
}

}  // namespace grpo::cluster
