// RemoteSource: RolloutRequests -> per-completion /v1/completions through the Router, adapter
// versions -> all-or-nothing loads, discovery -> router membership.
#include "core/run/remote_source.h"

#include <QCoreApplication>
#include <QObject>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/cluster/cluster_token.h"
#include "core/cluster/discovery.h"
#include "core/cluster/router.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/common/strings.h"
#include "core/hub/hf_cache.h"
#include "core/io/hf_config.h"
#include "core/records/run_dir.h"

namespace grpo::run {
namespace {

// The adapter weights' hash from the version's SHA256SUMS ("" when absent).
std::string weights_sha256(const std::string& dir) {
  const std::string sums = path_join(dir, "SHA256SUMS");
  if (!file_exists(sums)) return "";
  for (const auto& line : split(read_file(sums, kMaxSha256SumsBytes), '\n')) {
    const auto parts = split(trim(line), ' ');
    if (parts.size() >= 2 && parts.back() == "adapter_model.safetensors") return parts.front();
  }
  return "";
}

}  // namespace

nlohmann::json RemoteAccounting::to_json() const {
  return {{"delivered_groups", delivered_groups}, {"delivered_completions", delivered_completions},
          {"discarded_completions", discarded_completions}, {"duplicate_groups", duplicate_groups},
          {"failed_batches", failed_batches}, {"router", router}, {"routing", routing}};
}

// Adapter versions kept registered on workers for a max_staleness: every version still sampled
// from; the one being swapped in makes RunDirectory::keep_versions.
static int64_t worker_keep_versions(int64_t max_staleness) { return RunDirectory::keep_versions(max_staleness) - 1; }

RemoteSourceOptions remote_options_from_config(const grpo::TrainConfig& cfg, const std::string& run_dir) {
  RemoteSourceOptions o;
  o.worker_urls = cfg.worker_urls;
  const std::string token_file = cfg.cluster_token_file.empty() ? cluster::default_token_path() : cfg.cluster_token_file;
  o.token = cluster::load_or_create_token(token_file);
  o.tls_pins = cluster::parse_tls_pins(cfg.cluster_tls_fingerprint, "cluster_tls_fingerprint");
  o.discovery = cfg.discovery;
  o.discovery_address = cfg.discovery_address;
  o.worker_timeout_s = cfg.worker_timeout_s;
  o.group_routing = cfg.worker_routing != "prefix";
  const std::string model_config = path_join(hub::resolve_model_dir(cfg.model_name_or_path, cfg.model_revision), "config.json");
  if (file_exists(model_config)) o.vocab_size = io::ModelConfig::load(model_config).vocab_size;
  o.keep_versions = worker_keep_versions(cfg.max_staleness);
  o.run_dir = run_dir;
  if (o.discovery) cluster::parse_host_port(o.discovery_address, "discovery_address");  // fail early
  for (const auto& u : o.worker_urls)
    check(starts_with(u, "http://") || starts_with(u, "https://"), "worker_urls",
          "'" + u + "' is not an http(s):// URL", "e.g. http://10.0.0.5:8000");
  return o;
}

RemoteSource::RemoteSource(RemoteSourceOptions options, std::string name)
    : opts_(std::move(options)), name_(std::move(name)), keep_versions_(opts_.keep_versions) {
  check(!opts_.worker_urls.empty() || opts_.discovery || opts_.joins, name_, "no worker URLs and discovery is off",
        "set worker_urls, discovery: true or slurm_workers");
}

RemoteSource::~RemoteSource() {
  if (!opts_.run_dir.empty() && router_) {
    try {
      RunDirectory(opts_.run_dir).append_event({{"event", "remote_accounting"}, {"source", name_},
                                                {"accounting", accounting().to_json()}});
    } catch (const std::exception& e) {
      log_warn(name_ + ": " + e.what());
    }
  }
  // The router's sockets belong to the (finished) producer thread; nothing is pending by now.
  directory_.reset();
  router_.reset();
}

void RemoteSource::start_in_this_thread() {
  if (router_) return;
  check(QCoreApplication::instance() != nullptr, name_, "no QCoreApplication: Qt's network event loops need one",
        "create a QCoreApplication (or QApplication) before the engine runs with workers");
  cluster::RouterOptions ro;
  ro.token = opts_.token;
  ro.tls_pins = opts_.tls_pins;
  ro.request_timeout_s = opts_.worker_timeout_s;
  ro.group_routing = opts_.group_routing;
  ro.vocab_size = opts_.vocab_size;
  auto router = std::make_unique<cluster::Router>(ro, [this](const nlohmann::json& e) {
    nlohmann::json ev = e;
    ev["source"] = name_;
    if (opts_.on_event) opts_.on_event(ev);
  });
  std::vector<std::pair<WorkerAction, std::string>> early;
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    router_ = std::move(router);
    early.swap(early_);
  }
  for (const auto& [action, url] : early) command(action, url);
  for (const auto& u : opts_.worker_urls) router_->add_worker(u);
  if (opts_.discovery) {
    directory_ = std::make_unique<cluster::WorkerDirectory>(
        cluster::beacon_key(opts_.token), cluster::parse_host_port(opts_.discovery_address, "discovery_address"),
        opts_.discovery_forget_s, /*self_timed=*/false);
    QObject::connect(directory_.get(), &cluster::WorkerDirectory::workerJoined, [this](const QString& url, const QString& name) {
      {
        std::lock_guard<std::mutex> lock(view_mu_);
        names_[url.toStdString()] = name.toStdString();
      }
      router_->add_worker(url.toStdString());
    });
    QObject::connect(directory_.get(), &cluster::WorkerDirectory::workerLeft, [this](const QString& url, const QString&) {
      router_->remove_worker(url.toStdString(), "its beacons stopped");
    });
  }
}

void RemoteSource::on_version_published(int64_t version, const std::string& adapter_dir) {
  std::lock_guard<std::mutex> lock(pending_mu_);
  pending_[version] = std::filesystem::absolute(adapter_dir).lexically_normal().string();
}

void RemoteSource::on_max_staleness(int64_t max_staleness) {
  // Raised, older versions stay registered from the next load on; lowered, the next load unloads
  // down to the new count.
  keep_versions_ = worker_keep_versions(max_staleness);
}

std::string RemoteSource::model_for(int64_t version) const {
  return version == 0 ? router_->base_model() : RunFolder::adapter_name(version);
}

void RemoteSource::take_up_new_version() {
  std::map<int64_t, std::string> pending;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending.swap(pending_);
  }
  if (pending.empty()) return;
  // Only the newest matters: older ones would be stale before they were used.
  const auto [version, dir] = *pending.rbegin();
  if (version <= loaded_version_.load()) return;
  try {
    router_->load_adapter(model_for(version), dir, weights_sha256(dir));
  } catch (const Error& e) {
    // Keep sampling with the version we have; the trainer drops what gets too stale.
    log_warn(name_ + ": " + e.what());
    if (opts_.on_event)
      opts_.on_event({{"event", "warning"}, {"source", name_}, {"severity", "warning"}, {"message", e.what()},
                      {"advice", "the workers keep sampling with version " + std::to_string(loaded_version_.load()) +
                                     " and the load is tried again with the next version; samples that grow too "
                                     "stale are dropped"}});
    return;
  }
  loaded_[version] = dir;
  while (static_cast<int64_t>(loaded_.size()) > keep_versions_.load()) {
    router_->unload_adapter(model_for(loaded_.begin()->first));
    loaded_.erase(loaded_.begin());
  }
  // Set last, so that a reader on another thread who sees this version also sees the versions
  // that left the window unloaded from the workers.
  loaded_version_ = version;
}

void RemoteSource::wait_for_a_worker(const std::function<bool()>& stop) {
  start_in_this_thread();
  if (directory_) directory_->poll();
  // No worker yet: wait in short slices, taking in announced workers between them.
  const auto wait_until = std::chrono::steady_clock::now() + std::chrono::duration<double>(opts_.wait_for_workers_s);
  while (router_->workers_up() == 0 && std::chrono::steady_clock::now() < wait_until) {
    if (stop && stop()) return;  // the run is stopping: nothing to wait for
    router_->wait_for_workers(1, 0.5);
    if (directory_) directory_->poll();
  }
  take_up_new_version();
  check(router_->workers_up() > 0, name_, "no worker is up",
        "check that `grpo worker` runs, shares the cluster token, and is reachable (workers drained or "
        "paused in the app take no requests)");
}

// The G completion requests of one group: n = 1 each, as TRL's rollout worker sends them, kept on
// one worker by their affinity key (docs/workers.md, "Routing").
std::vector<cluster::CompletionRequest> RemoteSource::requests_for(const RolloutRequest& r,
                                                                   const rollout::SamplingParams& params,
                                                                   const std::string& model) const {
  std::vector<cluster::CompletionRequest> out;
  for (int64_t i = 0; i < r.n; ++i) {
    cluster::CompletionRequest c;
    c.model = model;
    c.prompt = r.prompt_ids;
    c.max_tokens = params.max_tokens;
    c.temperature = params.temperature;
    c.top_p = params.top_p;
    c.top_k = params.top_k > 0 ? params.top_k : -1;
    c.min_p = params.min_p;
    c.stop_token_ids = params.stop_token_ids;
    c.stop = params.stop;
    // One RNG stream per completion, derived from the group's seed (reproducible per request).
    c.seed = params.seed * 1000003ULL + r.prompt_key * 131ULL + static_cast<uint64_t>(i);
    c.n = 1;
    c.affinity = "group-" + std::to_string(r.group_id);
    out.push_back(std::move(c));
  }
  return out;
}

rollout::Completion RemoteSource::to_completion(const cluster::CompletionOutcome& o) {
  const auto& ch = o.response.choices.front();
  rollout::Completion c;
  c.token_ids = ch.token_ids;
  c.logprobs.assign(ch.logprobs.begin(), ch.logprobs.end());
  c.finish_reason = ch.finish_reason;
  tokens_ += static_cast<int64_t>(c.token_ids.size());
  return c;
}

void RemoteSource::count_delivered(const RolloutResult& r) {
  std::lock_guard<std::mutex> lock(acc_mu_);
  if (!seen_groups_.insert(r.group_id).second) ++acc_.duplicate_groups;
  ++acc_.delivered_groups;
  acc_.delivered_completions += static_cast<int64_t>(r.completions.size());
}

std::vector<RolloutResult> RemoteSource::generate(const std::vector<RolloutRequest>& requests,
                                                  const rollout::SamplingParams& params) {
  wait_for_a_worker();
  const int64_t version = loaded_version_.load();
  const std::string model = model_for(version);
  check(!model.empty(), name_, "the workers did not report their base model id in /v1/models");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<cluster::CompletionRequest> reqs;
  for (const auto& r : requests)
    for (auto& c : requests_for(r, params, model)) reqs.push_back(std::move(c));
  // A batch may wait for one re-dispatch after a worker timed out, plus the answer itself.
  const auto outcomes = router_->complete(reqs, 3 * opts_.worker_timeout_s + 10);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t answered = 0;
  std::string first_error;
  for (const auto& o : outcomes) {
    if (o.ok) ++answered;
    else if (first_error.empty()) first_error = o.error;
  }
  if (answered != static_cast<int64_t>(outcomes.size())) {
    std::lock_guard<std::mutex> lock(acc_mu_);
    acc_.discarded_completions += answered;
    ++acc_.failed_batches;
    throw Error(name_, std::to_string(outcomes.size() - static_cast<size_t>(answered)) + " of " +
                           std::to_string(outcomes.size()) + " completions failed: " + first_error);
  }
  std::vector<RolloutResult> out;
  size_t k = 0;
  for (const auto& r : requests) {
    RolloutResult res;
    res.group_id = r.group_id;
    res.policy_version = version;
    res.source = name_;
    res.duration_s = dt;
    for (int64_t i = 0; i < r.n; ++i, ++k) res.completions.push_back(to_completion(outcomes[k]));
    out.push_back(std::move(res));
  }
  for (const auto& r : out) count_delivered(r);
  return out;
}

struct RemoteSource::StreamState {
  struct Pending {  // a group with requests out
    RolloutResult result;
    std::vector<std::optional<cluster::CompletionOutcome>> outcomes;
    size_t answered = 0;
    std::string error;
    std::chrono::steady_clock::time_point started;
  };
  std::map<int64_t, Pending> groups;
  std::map<uint64_t, std::pair<int64_t, size_t>> owner;  // router request id -> (group, index)
  std::deque<RolloutResult> ready;                       // finished, not yet taken by the engine
};

// A group whose every completion is answered: ready when all succeeded, else failed whole.
void RemoteSource::settle(StreamState& st, int64_t gid, const StreamHooks& hooks) {
  auto& g = st.groups.at(gid);
  if (g.answered < g.outcomes.size()) return;
  int64_t ok = 0;
  for (const auto& o : g.outcomes) ok += o->ok ? 1 : 0;
  if (ok == static_cast<int64_t>(g.outcomes.size())) {
    for (const auto& o : g.outcomes) g.result.completions.push_back(to_completion(*o));
    g.result.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - g.started).count();
    st.ready.push_back(std::move(g.result));  // delivered once the engine takes it
  } else {
    {
      std::lock_guard<std::mutex> lock(acc_mu_);
      acc_.discarded_completions += ok;
      ++acc_.failed_batches;
    }
    hooks.fail(gid, std::to_string(static_cast<int64_t>(g.outcomes.size()) - ok) + " of " +
                        std::to_string(g.outcomes.size()) + " completions failed: " + g.error);
  }
  st.groups.erase(gid);
}

void RemoteSource::collect(StreamState& st, double wait_s, const StreamHooks& hooks) {
  for (auto& [id, outcome] : router_->poll(wait_s)) {
    const auto [gid, i] = st.owner.at(id);
    st.owner.erase(id);
    auto& g = st.groups.at(gid);
    if (!outcome.ok && g.error.empty()) g.error = outcome.error;
    g.outcomes[i] = std::move(outcome);
    ++g.answered;
    settle(st, gid, hooks);
  }
}

bool RemoteSource::tend_workers(const std::function<bool()>& stop) {
  try {
    if (router_ == nullptr || router_->workers_up() == 0) wait_for_a_worker(stop);
    else take_up_new_version();
    if (directory_) directory_->poll();
  } catch (const Error& e) {  // no worker for now: what is out still finishes or times out
    // A warning, not "error": the run goes on (and waits for a worker), so its state stays running
    // (run_state_after folds "error" into failed).
    if (opts_.on_event)
      opts_.on_event({{"event", "warning"}, {"source", name_}, {"severity", "warning"}, {"message", e.what()},
                      {"advice", e.hint().empty() ? std::string("the run waits until a worker answers") : e.hint()}});
    log_warn(name_ + ": " + e.what());
  }
  return router_ != nullptr;
}

// Hands over what is done, then sends new groups while the engine takes what is done.
void RemoteSource::refill(StreamState& st, const StreamHooks& hooks) {
  while (!st.ready.empty() && hooks.offer(st.ready.front())) {
    count_delivered(st.ready.front());
    st.ready.pop_front();
  }
  const std::string model = router_->workers_up() > 0 ? model_for(loaded_version_.load()) : std::string();
  rollout::SamplingParams params;
  while (st.ready.empty() && !model.empty()) {
    auto r = hooks.next(&params);
    if (!r) break;
    auto& g = st.groups[r->group_id];
    g.result.group_id = r->group_id;
    g.result.policy_version = loaded_version_.load();
    g.result.source = name_;
    g.started = std::chrono::steady_clock::now();
    auto reqs = requests_for(*r, params, model);
    g.outcomes.resize(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i)
      st.owner[router_->submit(reqs[i], 3 * opts_.worker_timeout_s + 10)] = {r->group_id, i};
  }
}

// Stopping: give up what is out, and report every unfinished group to the engine.
void RemoteSource::end_stream(StreamState& st, const StreamHooks& hooks) {
  if (router_) {
    router_->cancel_stream("the run is stopping");
    collect(st, 0, hooks);
  }
  for (auto& r : st.ready) {  // answered, never taken: discarded like a failed batch's completions
    {
      std::lock_guard<std::mutex> lock(acc_mu_);
      acc_.discarded_completions += static_cast<int64_t>(r.completions.size());
    }
    hooks.fail(r.group_id, "the run is stopping");
  }
  for (auto& [gid, g] : st.groups) hooks.fail(gid, "the run is stopping");
}

void RemoteSource::stream(const StreamHooks& hooks) {
  StreamState st;
  while (!hooks.stop()) {
    if (!tend_workers(hooks.stop)) {  // could not even start (e.g. the discovery port): try again shortly
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    refill(st, hooks);
    collect(st, 0.1, hooks);
  }
  end_stream(st, hooks);
}

std::vector<WorkerInfo> RemoteSource::workers() const {
  std::lock_guard<std::mutex> lock(view_mu_);
  std::vector<WorkerInfo> out;
  if (!router_) return out;
  for (const auto& w : router_->workers()) {
    WorkerInfo i;
    i.url = w.url;
    auto name = names_.find(w.url);
    i.name = name != names_.end() ? name->second : w.url.substr(w.url.find("://") == std::string::npos ? 0 : w.url.find("://") + 3);
    i.status = w.state;
    i.adapter_version = w.adapter.empty() ? 0 : RunFolder::parse_adapter_name(w.adapter).value_or(-1);
    i.inflight = w.inflight;
    i.completed = w.completed;
    i.dispatched = w.dispatched;
    i.affinity_hits = w.affinity_hits;
    i.tokens = w.tokens;
    i.affinity = w.dispatched > 0 ? static_cast<double>(w.affinity_hits) / static_cast<double>(w.dispatched) : 0.0;
    i.last_error = w.last_error;
    if (auto job = jobs_.find(w.url); job != jobs_.end()) i.job = job->second;
    out.push_back(std::move(i));
  }
  return out;
}

void RemoteSource::command(WorkerAction action, const std::string& url) {
  std::lock_guard<std::mutex> lock(view_mu_);
  if (!router_) {  // the producer thread has not started the router yet: it takes these on start
    early_.emplace_back(action, url);
    return;
  }
  using K = cluster::WorkerCommand;
  const K::Kind kinds[] = {K::Add, K::Remove, K::Drain, K::Pause, K::Resume};
  router_->request({kinds[static_cast<int>(action)], url});
}

bool RemoteSource::join(const std::string& url, const std::string& name, const std::string& job) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(view_mu_);
    if (!name.empty()) names_[url] = name;
    if (!job.empty()) jobs_[url] = job;
    first = joined_.insert(url).second;
  }
  command(WorkerAction::Add, url);
  return first;
}

std::vector<std::string> RemoteSource::urls_of_job(const std::string& job) const {
  std::lock_guard<std::mutex> lock(view_mu_);
  std::vector<std::string> out;
  for (const auto& [url, j] : jobs_)
    if (j == job) out.push_back(url);
  return out;
}

RemoteAccounting RemoteSource::accounting() const {
  RemoteAccounting a;
  {
    std::lock_guard<std::mutex> lock(acc_mu_);
    a = acc_;
  }
  if (router_) {
    a.router = router_->accounting().to_json();
    const auto s = router_->routing_stats();
    a.routing = {{"routed", s.routed}, {"affinity", s.affinity}, {"spilled", s.spilled}, {"unmatched", s.unmatched},
                 {"grouped", s.grouped}};
  }
  return a;
}

}  // namespace grpo::run
