// Router: worker bookkeeping and commands, and dispatch of completions (complete(), and the
// submit()/poll() stream) with re-dispatch, all driven by QNetworkAccessManager callbacks in one
// thread. Joining workers and adapter broadcasts: router_join.cpp.
#include "core/cluster/router.h"

#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <deque>
#include <utility>

#include "core/cluster/router_internal.h"
#include "core/common/error.h"
#include "core/common/log.h"
#include "core/common/timing.h"

namespace grpo::cluster {

using namespace router_detail;

nlohmann::json RouterAccounting::to_json() const {
  return {{"requests", requests}, {"dispatched", dispatched}, {"completed", completed},
          {"redispatched", redispatched}, {"rejected", rejected}, {"cancelled", cancelled}, {"abandoned", abandoned}, {"withdrawn", withdrawn}};
}

Router::Router(RouterOptions options, EventFn on_event)
    : opts_(std::move(options)), on_event_(std::move(on_event)), prefix_(16, opts_.imbalance, 500000, opts_.group_routing) {}

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
  w.service_s = 0;  // measured afresh when it is back
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
      if (w->state == Worker::Up && !w->removed && !w->draining && !w->paused) cands.push_back({id, w->inflight, w->service_s});
    if (cands.empty()) return;  // the tick retries once a worker is back
    const size_t job = b->pending.front();
    b->pending.pop_front();
    auto& j = b->jobs[job];
    if (retired_.count(j.req.model)) {  // its version left the staleness window while it waited
      give_up(*b, job, "adapter " + j.req.model + " was unloaded (too stale)");
      continue;
    }
    const int64_t hits = prefix_.stats().affinity;
    const int id = prefix_.choose(cands, j.req.model, j.req.prompt, j.req.affinity);
    Worker* w = find(id);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++w->inflight;
      j.load_at_send = w->inflight;
      j.sent_at = now_s();
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
      // Seconds per request, for shortest-expected-delay routing (prefix_router.h): a batching
      // worker answers its L requests in flight together, so one costs its answer time over L.
      if (w->epoch == j.epoch) {
        const double sample = std::max(0.0, now_s() - j.sent_at) / static_cast<double>(std::max<int64_t>(1, j.load_at_send));
        w->service_s = w->service_s > 0 ? 0.8 * w->service_s + 0.2 * sample : sample;
      }
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
