// Router: workers joining (probe, then every live adapter loaded, all or nothing) and rejoining
// after faults, and adapter broadcasts to the workers that are up (load_adapter, unload_adapter,
// pause/resume). Same thread as the rest of the Router (router.cpp).
#include <QNetworkAccessManager>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/common/json_limits.h"
#include "core/cluster/router.h"
#include "core/cluster/router_internal.h"
#include "core/common/error.h"
#include "core/common/log.h"

namespace grpo::cluster {

using namespace router_detail;

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
      if (json_depth(m.body) > kMaxJsonDepth) return probe_done(id, epoch, false, "/v1/models: nested too deep");
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

}  // namespace grpo::cluster
