#include "core/run/engine_session.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/cluster/cluster_token.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/records/run_dir.h"
#include "core/run/engine.h"
#include "core/run/remote_source.h"
#include "core/serve/dashboard_routes.h"
#include "core/serve/run_endpoint.h"

namespace grpo::run {
namespace {

// Run events reach the front end as they happen (EngineOptions::on_event), not when the events
// file takes them: a full bucket holds back its own bucket_write_failed until space returns. The
// tail of the events file still delivers what other writers append (a source's final accounting,
// a line a tool adds); a line whose event already went out live is skipped, once. The two copies
// are matched by the event's identity, the "seq" the engine gives each event it raises: a line
// without one came from another writer and is always delivered.
class LiveEvents {
public:
  static constexpr size_t kMax = 4096;  // events awaiting delivery, and delivered awaiting their line

  void push(const nlohmann::json& e) {  // engine threads, before the event is appended to the file
    std::lock_guard<std::mutex> lock(mu_);
    if (incoming_.size() < kMax) incoming_.push_back(e);  // past it, the tail delivers them
  }
  // Watcher thread. `lines` must be read from the tail BEFORE this call: each event is pushed before
  // it is appended, so the live twin of every line read is already here.
  std::vector<nlohmann::json> merge(std::vector<nlohmann::json> lines) {
    std::deque<nlohmann::json> in;
    {
      std::lock_guard<std::mutex> lock(mu_);
      in.swap(incoming_);
    }
    std::vector<nlohmann::json> out;
    for (auto& e : in) {
      if (const auto seq = seq_of(e)) {
        if (pending_.size() >= kMax) pending_.pop_front();  // never written (bucket gave up, run ended)
        pending_.push_back(*seq);
      }
      out.push_back(std::move(e));
    }
    for (auto& l : lines) {
      const auto seq = seq_of(l);
      auto it = seq ? std::find(pending_.begin(), pending_.end(), *seq) : pending_.end();
      if (it != pending_.end()) pending_.erase(it);
      else out.push_back(std::move(l));
    }
    return out;
  }

private:
  static std::optional<int64_t> seq_of(const nlohmann::json& j) {
    const auto it = j.is_object() ? j.find("seq") : j.end();
    if (it == j.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  }
  std::mutex mu_;
  std::deque<nlohmann::json> incoming_;
  std::deque<int64_t> pending_;
};

// The engine's remote-worker source, if it has one.
RemoteSource* remote_of(Engine* e) {
  if (!e) return nullptr;
  for (const auto& s : e->sources())
    if (auto* r = dynamic_cast<RemoteSource*>(s.get())) return r;
  return nullptr;
}

// Per-worker tok/s from successive token counts, smoothed over a few snapshots.
class WorkerRates {
public:
  void rate(std::vector<WorkerInfo>& ws) {
    const auto now = std::chrono::steady_clock::now();
    std::map<std::string, Last> next;
    for (auto& w : ws) {
      Last l{w.tokens, now, 0};
      auto it = last_.find(w.url);
      if (it != last_.end()) {
        const double dt = std::chrono::duration<double>(now - it->second.when).count();
        const double inst = dt > 0 ? static_cast<double>(w.tokens - it->second.tokens) / dt : 0.0;
        l.rate = 0.5 * it->second.rate + 0.5 * std::max(0.0, inst);
      }
      w.tok_s = l.rate;
      next[w.url] = l;
    }
    last_.swap(next);
  }

private:
  struct Last {
    int64_t tokens;
    std::chrono::steady_clock::time_point when;
    double rate;
  };
  std::map<std::string, Last> last_;
};

}  // namespace

struct EngineSession::Impl {
  mutable std::mutex mu;
  std::thread thread;
  Engine* engine = nullptr;  // while it exists (guarded by mu)
  bool active = false;
  bool want_pause = false, want_stop = false;  // given before the engine existed
  std::string run_dir, adapter, error;
  std::atomic<int64_t> step{0};
  std::atomic<EngineState> state{EngineState::Idle};
  // Serving (guarded by mu): the endpoint while it runs, a request made while the model loads,
  // what the endpoint needs from the config, and where its link goes.
  std::unique_ptr<RunEndpoint> endpoint;
  std::string serve_request, link, token_file;
  bool engine_gone = false;  // the run's engine has ended: nothing more to serve
  int64_t max_steps = 0;
  std::function<void(const std::string&, const std::string&)> on_serving;

  // Starts the endpoint on `engine` (mu held); "" or why not.
  std::string start_serving_locked(std::string host_port);  // by value: it clears serve_request
  // Takes the endpoint out (mu held) so that it is stopped outside the lock.
  std::unique_ptr<RunEndpoint> take_endpoint_locked() {
    link.clear();
    serve_request.clear();
    return std::move(endpoint);
  }
  void report_serving(const std::string& l, const std::string& e) const {
    if (on_serving) on_serving(l, e);
  }

  void body(grpo::TrainConfig cfg, SessionOptions options, SessionCallbacks cb);
  // The watcher thread: workers every kWorkersIntervalMs, events as they come, state changes;
  // until `done`, then once more for the final events.
  void watch(JsonlTail& tail, LiveEvents& live, const std::atomic<bool>& done, const SessionCallbacks& cb);
  // Builds the engine and runs it (the state mirrored meanwhile); returns the final adapter.
  std::string run_engine(const grpo::TrainConfig& cfg, const SessionOptions& options,
                         const std::shared_ptr<LiveEvents>& live, const SessionCallbacks& cb,
                         std::unique_ptr<Engine>& eng, std::string& failure);
};

EngineSession::EngineSession() : impl_(std::make_unique<Impl>()) {}

EngineSession::~EngineSession() {
  stop();
  wait();
}

void EngineSession::start(const grpo::TrainConfig& cfg, const std::string& run_dir, SessionOptions options,
                          SessionCallbacks callbacks) {
  check(!active(), "engine session", "a run is still active", "stop it first");
  wait();  // the previous run's thread, if any, has ended: join it
  check(!run_dir.empty(), "engine session", "no run directory given");
  grpo::TrainConfig resolved = cfg;
  resolved.output_dir = run_dir;
  resolved.validate("run config");
  if (!options.serve.empty()) (void)parse_host_port(options.serve, "serve address");
  if (!options.serve.empty()) resolved.serve = options.serve;  // the run config's serve key otherwise
  if (!resolved.serve.empty()) (void)parse_host_port(resolved.serve, "serve");
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->active = true;
  impl_->want_pause = impl_->want_stop = false;
  impl_->run_dir = run_dir;
  impl_->adapter.clear();
  impl_->error.clear();
  impl_->step = 0;
  impl_->state = EngineState::Idle;
  impl_->serve_request = resolved.serve;
  impl_->engine_gone = false;
  impl_->link.clear();
  impl_->token_file = resolved.cluster_token_file;
  impl_->max_steps = resolved.max_steps;
  impl_->on_serving = callbacks.on_serving;
  impl_->thread = std::thread([impl = impl_.get(), resolved, options, cb = std::move(callbacks)] {
    impl->body(resolved, options, cb);
  });
}

void EngineSession::Impl::watch(JsonlTail& tail, LiveEvents& live, const std::atomic<bool>& done,
                                const SessionCallbacks& cb) {
  EngineState last = EngineState::Idle;
  WorkerRates rates;
  auto workers_due = std::chrono::steady_clock::now();
  auto poll = [&] {
    if (cb.on_workers && std::chrono::steady_clock::now() >= workers_due) {
      workers_due = std::chrono::steady_clock::now() + std::chrono::milliseconds(EngineSession::kWorkersIntervalMs);
      std::vector<WorkerInfo> ws;
      bool remote = false;
      {
        std::lock_guard<std::mutex> lock(mu);  // the engine outlives this while it is set
        if (remote_of(engine)) {  // the Workers page, as the run's endpoint reads them (RunControl)
          remote = true;
          ws = engine->workers();
        }
      }
      rates.rate(ws);
      if (remote) cb.on_workers(ws);
    }
    for (auto& j : live.merge(tail.read_new_records())) {
      EngineEvent e{j.value("event", std::string()), j.value("time", 0.0), j.value("step", int64_t{0}), j};
      if (cb.on_event) cb.on_event(e);
    }
    const EngineState s = state.load();
    if (s != last) {
      last = s;
      if (cb.on_state) cb.on_state(s);
    }
  };
  while (!done.load()) {
    poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  poll();  // the final events (stop/finished/error) and state
}

std::string EngineSession::Impl::run_engine(const grpo::TrainConfig& cfg, const SessionOptions& options,
                                            const std::shared_ptr<LiveEvents>& live, const SessionCallbacks& cb,
                                            std::unique_ptr<Engine>& eng, std::string& failure) {
  EngineOptions eo;
  eo.local_generators = options.local_generators >= 0 ? options.local_generators : static_cast<int>(cfg.local_generators);
  eo.resume = options.resume;
  eo.on_event = [live](const nlohmann::json& e) { live->push(e); };
  eng = std::make_unique<Engine>(cfg, cfg.output_dir, eo);
  std::string serve_error, serve_link;
  bool served = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    engine = eng.get();
    if (want_pause) eng->pause();
    if (want_stop) eng->stop();
    if (!serve_request.empty()) {  // asked for at start(), or while the model loaded
      served = true;
      serve_error = start_serving_locked(serve_request);
      serve_link = link;
    }
  }
  if (served) report_serving(serve_link, serve_error);
  // state mirrors the engine's through the step callback and a small poller below.
  std::atomic<bool> run_done{false};
  std::thread mirror([&] {
    while (!run_done.load()) {
      state = eng->state();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::string adapter;
  try {
    adapter = eng->run([&](const StepReport& r) {
      step = r.step;
      state = eng->state();
      if (cb.on_step) cb.on_step(r);
    });
  } catch (const std::exception& e) {
    failure = e.what();
  }
  run_done = true;
  mirror.join();
  state = eng->state();
  return adapter;
}

void EngineSession::Impl::body(grpo::TrainConfig cfg, SessionOptions options, SessionCallbacks cb) {
  std::string adapter, failure;
  std::atomic<bool> done{false};
  std::unique_ptr<Engine> eng;
  std::thread watcher;
  try {
    // Follow the events file from its current end, so a resumed run reports only what happens now.
    auto tail = std::make_shared<JsonlTail>(RunDirectory(cfg.output_dir).follow_events());  // creates the layout
    auto live = std::make_shared<LiveEvents>();
    watcher = std::thread([this, tail, live, &done, &cb] { watch(*tail, *live, done, cb); });
    adapter = run_engine(cfg, options, live, cb, eng, failure);
  } catch (const std::exception& e) {
    failure = e.what();
    state = EngineState::Failed;
  }
  std::unique_ptr<RunEndpoint> endpoint_left;
  {
    std::lock_guard<std::mutex> lock(mu);
    engine = nullptr;
    engine_gone = true;
    endpoint_left = take_endpoint_locked();
  }
  if (endpoint_left) {  // before the engine it serves goes
    endpoint_left.reset();
    report_serving("", "");
  }
  eng.reset();  // joins the engine's producers before the final report
  done = true;
  if (watcher.joinable()) watcher.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    this->adapter = adapter;
    error = failure;
    active = false;
  }
  if (cb.on_done) cb.on_done(adapter, failure);
}

void EngineSession::pause() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->engine) impl_->engine->pause();
  else impl_->want_pause = true;
}

void EngineSession::resume() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->engine) impl_->engine->resume();
  impl_->want_pause = false;
}

void EngineSession::stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->engine) impl_->engine->stop();
  else if (impl_->active) impl_->want_stop = true;
}

std::string EngineSession::worker_command(WorkerAction action, const std::string& url) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->engine) return impl_->active ? "the model is still loading: try again once the run has started"
                                           : "no run is active";
  RemoteSource* r = remote_of(impl_->engine);
  if (!r) return "this run has no remote workers (it started without worker URLs, discovery or Slurm workers)";
  r->command(action, url);
  return "";
}

std::string EngineSession::launch_workers(int count, const nlohmann::json& overrides, std::string* job) {
  std::lock_guard<std::mutex> lock(impl_->mu);  // the engine outlives this while it is set
  if (!impl_->engine) return impl_->active ? "the model is still loading: try again once the run has started"
                                           : "no run is active";
  try {
    const std::string id = impl_->engine->launch_workers(count, overrides);
    if (job) *job = id;
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string EngineSession::cancel_workers(const std::string& job) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->engine) return "no run is active";
  try {
    impl_->engine->cancel_workers(job);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string EngineSession::Impl::start_serving_locked(std::string host_port) {
  serve_request.clear();
  try {
    RunEndpointOptions ro;
    std::tie(ro.host, ro.port) = parse_host_port(host_port, "serve address");
    ro.bearer_token = cluster::load_or_create_token(token_file.empty() ? cluster::default_token_path() : token_file);
    ro.max_steps = max_steps;
    auto e = std::make_unique<RunEndpoint>(*engine, ro);
    e->start();
    engine->set_join_url(e->public_url());  // where Slurm-launched workers join
    link = dashboard_url(e->url(), ro.bearer_token);
    endpoint = std::move(e);
    return "";
  } catch (const std::exception& e) {
    link.clear();
    return e.what();
  }
}

std::string EngineSession::serve(const std::string& host_port) {
  std::string error, started_link;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->active || impl_->engine_gone) return "no run is active";
    if (impl_->endpoint) return "already serving on " + impl_->link.substr(0, impl_->link.find('#'));
    if (!impl_->engine) {  // the model is loading: run_engine starts it once the engine exists
      try {
        (void)parse_host_port(host_port, "serve address");
      } catch (const std::exception& e) {
        return e.what();
      }
      impl_->serve_request = host_port;
      return "";
    }
    error = impl_->start_serving_locked(host_port);
    started_link = impl_->link;
  }
  if (error.empty()) impl_->report_serving(started_link, "");
  return error;
}

void EngineSession::stop_serving() {
  std::unique_ptr<RunEndpoint> e;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    e = impl_->take_endpoint_locked();
  }
  if (!e) return;
  e.reset();
  impl_->report_serving("", "");
}

std::string EngineSession::serving_link() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->link;
}

std::string EngineSession::retune(const nlohmann::json& changes) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->engine) return impl_->active ? "the model is still loading: retune once the run has started"
                                           : "no run is active";
  return impl_->engine->retune(changes);
}

bool EngineSession::active() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->active;
}

EngineState EngineSession::state() const { return impl_->state.load(); }
int64_t EngineSession::step() const { return impl_->step.load(); }

std::string EngineSession::run_dir() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->run_dir;
}

std::string EngineSession::final_adapter() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->adapter;
}

std::string EngineSession::error() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->error;
}

void EngineSession::wait() {
  if (impl_->thread.joinable() && impl_->thread.get_id() != std::this_thread::get_id()) impl_->thread.join();
}

}  // namespace grpo::run
