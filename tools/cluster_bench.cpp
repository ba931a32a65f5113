// `grpo bench cluster`: straggler, adapter distribution and scaling with real `grpo worker`
// processes on loopback. Each figure comes from real runs: a fresh set of workers per engine run
// (their adapter names start over with the run), the Router for loads and completions.
#include "tools/cluster_bench.h"

#include <QCoreApplication>
#include <QProcess>
#include <QTemporaryDir>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <torch/torch.h>

#include "core/cluster/cluster_token.h"
#include "core/cluster/router.h"
#include "core/common/bench_stats.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/common/timing.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "core/records/run_dir.h"
#include "core/run/engine.h"
#include "core/run/remote_source.h"
#include "core/text/tokenizer.h"

namespace grpo::run {

// ---------------------------------------------------------------- LocalWorker

LocalWorker::LocalWorker(LocalWorkerOptions options) : opts_(std::move(options)) {}

LocalWorker::~LocalWorker() { kill(); }

void LocalWorker::start(double timeout_s) {
  kill();
  const std::string out = path_join(opts_.log_dir, opts_.name + ".out");
  const std::string err = path_join(opts_.log_dir, opts_.name + ".err");
  p_ = std::make_unique<QProcess>();
  p_->setStandardOutputFile(QString::fromStdString(out));  // truncated: the URL line is the new one
  p_->setStandardErrorFile(QString::fromStdString(err), QIODevice::Append);
  QStringList args = {"worker", "--model", QString::fromStdString(opts_.model_dir), "--listen",
                      QString("127.0.0.1:%1").arg(opts_.port), "--token-file", QString::fromStdString(opts_.token_file),
                      "--bucket", QString::fromStdString(opts_.bucket), "--threads", QString::number(opts_.threads),
                      "--name", QString::fromStdString(opts_.name)};
  if (opts_.inject_delay_ms > 0) args << "--inject-delay-ms" << QString::number(opts_.inject_delay_ms);
  p_->start(QString::fromStdString(opts_.program), args);
  check(p_->waitForStarted(10000), opts_.program, "cannot start `grpo worker`: " + p_->errorString().toStdString());
  ++starts_;
  const auto t0 = SteadyClock::now();
  const std::string marker = "listening on ";
  while (seconds_since(t0) < timeout_s && p_->state() == QProcess::Running) {
    p_->waitForFinished(100);
    const std::string text = file_exists(out) ? read_file(out) : std::string();
    const size_t at = text.find(marker), end = at == std::string::npos ? at : text.find('\n', at);
    if (end != std::string::npos) {
      url_ = trim(text.substr(at + marker.size(), end - at - marker.size()));
      opts_.port = std::stoi(url_.substr(url_.rfind(':') + 1));  // a restart comes back on this port
      return;
    }
  }
  std::string log = file_exists(err) ? read_file(err) : std::string();
  if (log.size() > 2000) log = log.substr(log.size() - 2000);
  kill();
  throw Error("grpo worker " + opts_.name, "did not announce its URL within " + std::to_string(int(timeout_s)) +
                                               " s; its log (" + err + ") ends:\n" + log);
}

void LocalWorker::kill() {
  if (!p_) return;
  if (p_->state() != QProcess::NotRunning) {
    ::kill(static_cast<pid_t>(p_->processId()), SIGKILL);
    p_->waitForFinished(10000);
  }
  p_.reset();
}

bool LocalWorker::running() const { return p_ && p_->state() == QProcess::Running; }
int64_t LocalWorker::pid() const { return p_ ? static_cast<int64_t>(p_->processId()) : 0; }

std::vector<std::unique_ptr<LocalWorker>> start_local_workers(const LocalWorkerOptions& common, int count,
                                                              const std::vector<int>& delays_ms) {
  cluster::load_or_create_token(common.token_file);
  std::vector<std::unique_ptr<LocalWorker>> out;
  for (int i = 0; i < count; ++i) {
    LocalWorkerOptions o = common;
    o.name = common.name + std::to_string(i);
    o.inject_delay_ms = i < static_cast<int>(delays_ms.size()) ? delays_ms[i] : 0;
    out.push_back(std::make_unique<LocalWorker>(o));
    out.back()->start();
  }
  return out;
}

std::vector<std::string> worker_urls(const std::vector<std::unique_ptr<LocalWorker>>& workers) {
  std::vector<std::string> urls;
  for (const auto& w : workers) urls.push_back(w->url());
  return urls;
}

std::string accounting_violation(const nlohmann::json& a) {
  auto n = [](const nlohmann::json& j, const char* k) { return j.value(k, int64_t(0)); };
  const auto& r = a.at("router");
  if (n(r, "dispatched") != n(r, "completed") + n(r, "redispatched") + n(r, "rejected") + n(r, "cancelled"))
    return "router: dispatched != completed + redispatched + rejected + cancelled (" + r.dump() + ")";
  if (n(r, "requests") != n(r, "completed") + n(r, "abandoned") + r.value("withdrawn", int64_t{0}))
    return "router: requests != completed + abandoned + withdrawn (" + r.dump() + ")";
  if (n(a, "duplicate_groups") != 0) return "a group was delivered twice (" + a.dump() + ")";
  if (n(a, "delivered_completions") + n(a, "discarded_completions") != n(r, "completed"))
    return "source: delivered + discarded != router completed (" + a.dump() + ")";
  return "";
}

int64_t resident_bytes(int64_t pid) {
  std::ifstream f(pid > 0 ? "/proc/" + std::to_string(pid) + "/status" : std::string("/proc/self/status"));
  std::string line;
  while (std::getline(f, line))
    if (starts_with(line, "VmRSS:")) return std::stoll(trim(line.substr(6))) * 1024;  // "1234 kB"
  return 0;
}

grpo::TrainConfig worker_run_config(const WorkerRunSettings& w, const std::string& run_dir) {
  grpo::TrainConfig c;
  c.apply({{"model_name_or_path", w.model_dir}, {"task", "arith"}, {"task_difficulty", 1}, {"seed", 1},
           {"num_generations", w.num_generations}, {"prompts_per_step", w.prompts_per_step},
           {"max_completion_length", w.max_completion_length}, {"max_prompt_length", 64}, {"learning_rate", 1e-3},
           {"r", 8}, {"lora_alpha", 16}, {"token_budget", 4096}, {"max_steps", w.steps}, {"eval_steps", 0},
           {"save_steps", 0}, {"max_staleness", w.max_staleness}, {"weight_sync_steps", 1}, {"local_generators", 0},
           {"worker_routing", w.routing},
           // One step of queued rollouts, as the demo preset: a deeper queue (the default 1024
           // samples is 32 steps here) only fills with groups that grow too stale to train.
           {"queue_maxsize", w.prompts_per_step * w.num_generations},
           {"worker_urls", w.urls}, {"cluster_token_file", w.token_file}, {"worker_timeout_s", 60}},
          "bench");
  c.output_dir = run_dir;
  c.validate("bench");
  return c;
}

nlohmann::json summarize_worker_run(const std::string& run_dir, int64_t warmup_steps) {
  const RunFolder run(run_dir);
  const auto metrics = run.read_metrics(Malformed::Refuse), events = run.read_events(Malformed::Refuse);
  const auto cfg = run.read_config();
  const int64_t G = cfg.at("num_generations").get<int64_t>(), pps = cfg.at("prompts_per_step").get<int64_t>();
  const int64_t steps = static_cast<int64_t>(metrics.size());
  // Steps w+1..steps over the time since step w ended (the first steps include workers joining).
  const int64_t w = std::max<int64_t>(1, std::min<int64_t>(warmup_steps, steps - 1));
  double rate = 0, rollout_s = 0;
  int64_t rollout_n = 0;
  if (steps >= 2) {
    const double dt = metrics.back()["time"].get<double>() - metrics[static_cast<size_t>(w - 1)]["time"].get<double>();
    rate = dt > 0 ? 60.0 * static_cast<double>(steps - w) / dt : 0;
  }
  for (const auto& m : metrics)
    if (m.contains("rollout/duration_s") && m["rollout/duration_s"].is_number()) {
      rollout_s += m["rollout/duration_s"].get<double>();
      ++rollout_n;
    }
  int64_t dropped = 0, sources = 0;
  nlohmann::json sum = {{"requests", 0}, {"dispatched", 0}, {"completed", 0}, {"redispatched", 0}, {"rejected", 0},
                        {"cancelled", 0}, {"abandoned", 0}, {"withdrawn", 0}, {"delivered_completions", 0},
                        {"discarded_completions", 0}, {"duplicate_groups", 0}, {"failed_batches", 0}};
  nlohmann::json violations = nlohmann::json::array();
  int64_t lost = 0;
  for (const auto& e : events) {
    const std::string kind = e.value("event", "");
    if (kind == "finished" || kind == "stop") dropped = e.value("dropped_stale_total", int64_t(0));
    if (kind != "remote_accounting") continue;
    ++sources;
    const auto& a = e["accounting"];
    const std::string v = accounting_violation(a);
    if (!v.empty()) violations.push_back(e.value("source", "") + ": " + v);
    for (auto& [k, total] : sum.items()) {
      const auto& from = a.contains(k) ? a : a["router"];
      total = total.get<int64_t>() + from.value(k, int64_t(0));
    }
  }
  auto n = [&](const char* k) { return sum[k].get<int64_t>(); };
  lost += std::llabs(n("completed") - n("delivered_completions") - n("discarded_completions"));
  lost += std::llabs(n("dispatched") - n("completed") - n("redispatched") - n("rejected") - n("cancelled"));
  const int64_t trained = steps * pps * G;
  const int64_t in_queues = n("delivered_completions") - trained - dropped;
  const int64_t capacity = ((cfg.value("queue_maxsize", int64_t(0)) + G - 1) / G + std::max<int64_t>(2, pps) +
                            std::max<int64_t>(1, sources) * pps) * G;
  if (sources == 0) violations.push_back("no remote_accounting event in " + run.events_path());
  if (in_queues < 0 || in_queues > capacity)
    violations.push_back("delivered - trained - dropped = " + std::to_string(in_queues) + ", expected 0.." +
                         std::to_string(capacity));
  const double wall = steps >= 1 ? metrics.back()["time"].get<double>() - metrics.front()["time"].get<double>() : 0;
  return {{"steps", steps}, {"steps_per_min", rate}, {"warmup_steps", w},
          {"completions_per_s", rate / 60.0 * static_cast<double>(pps * G)}, {"wall_s", wall},
          {"rollout_s_mean", rollout_n > 0 ? rollout_s / static_cast<double>(rollout_n) : 0.0},
          {"trained_completions", trained}, {"dropped_stale_total", dropped}, {"in_queues_at_end", in_queues},
          {"samples_lost", lost}, {"accounting", sum}, {"accounting_violations", violations}};
}

namespace {

// Nearest-rank percentile of a non-empty sample.
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

bool wants(const ClusterBenchOptions& o, const std::string& part) {
  return std::find(o.parts.begin(), o.parts.end(), part) != o.parts.end();
}

// Sync mode over workers: each generate() (one step's rollouts) waits until the adapter of the
// step before was published, so every rollout is sampled by the current policy and generation
// and training never overlap (`grpo train --sync` keeps this loop in-process only).
class SyncGate : public RolloutSource {
public:
  SyncGate(std::unique_ptr<RolloutSource> inner, const Engine* engine) : inner_(std::move(inner)), engine_(engine) {}
  std::string name() const override { return inner_->name(); }
  std::vector<RolloutResult> generate(const std::vector<RolloutRequest>& requests,
                                      const rollout::SamplingParams& params) override {
    while (published_.load() < batches_ && engine_->state() == EngineState::Running)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto out = inner_->generate(requests, params);
    ++batches_;  // only a batch that arrived trains a step (a failed one is asked again)
    return out;
  }
  void on_version_published(int64_t version, const std::string& dir) override {
    inner_->on_version_published(version, dir);
    published_ = version;
  }
  int64_t tokens_generated() const override { return inner_->tokens_generated(); }

private:
  std::unique_ptr<RolloutSource> inner_;
  const Engine* engine_;
  std::atomic<int64_t> published_{0};
  int64_t batches_ = 0;
};

struct Scratch {
  QTemporaryDir tmp;
  std::string bucket, token_file, logs;
  Scratch() {
    check(tmp.isValid(), "bench", "cannot create a temporary directory", "is $TMPDIR writable?");
    bucket = tmp.path().toStdString();
    token_file = path_join(bucket, "cluster-token");
    logs = path_join(bucket, "logs");
    std::filesystem::create_directories(logs);
    cluster::load_or_create_token(token_file);
  }
  template <typename Options>
  LocalWorkerOptions worker_options(const Options& o) const {
    LocalWorkerOptions w;
    w.program = o.program;
    w.model_dir = o.model_dir;
    w.bucket = bucket;
    w.token_file = token_file;
    w.log_dir = logs;
    w.name = "w";
    w.threads = o.threads;
    return w;
  }
};

// One engine run over fresh workers (worker 0 slowed by `delay_ms`); its figures and accounting.
nlohmann::json straggler_run(const ClusterBenchOptions& o, const Scratch& s, const std::string& label, bool sync,
                             int delay_ms) {
  auto workers = start_local_workers(s.worker_options(o), o.workers, {delay_ms});
  const std::string run_dir = path_join(s.bucket, "run-" + label);
  WorkerRunSettings ws;
  ws.model_dir = o.model_dir;
  ws.urls = worker_urls(workers);
  ws.token_file = s.token_file;
  ws.steps = o.steps;
  ws.prompts_per_step = o.prompts_per_step;
  ws.num_generations = o.num_generations;
  ws.max_completion_length = o.max_completion_length;
  ws.max_staleness = o.max_staleness;
  ws.routing = o.routing;
  auto cfg = worker_run_config(ws, run_dir);
  const bool per_worker = !sync && o.sources == "per-worker";
  if (sync) {
    cfg.max_staleness = 0;
    cfg.max_inflight_tasks = cfg.prompts_per_step * cfg.num_generations;  // one step's rollouts
  } else if (per_worker) {
    cfg.max_inflight_tasks = o.workers * cfg.prompts_per_step * cfg.num_generations;  // one batch each
  }
  if (sync || per_worker) cfg.worker_urls.clear();  // the sources are added here instead
  EngineOptions eo;
  eo.local_generators = 0;
  {
    Engine engine(cfg, run_dir, eo);
    auto remote = [&](std::vector<std::string> urls, const std::string& name) {
      auto ro = remote_options_from_config(cfg, run_dir);
      ro.worker_urls = std::move(urls);
      ro.on_event = [run_dir](const nlohmann::json& e) { RunDirectory(run_dir).append_event(e); };
      return std::make_unique<RemoteSource>(ro, name);
    };
    if (sync) engine.add_source(std::make_unique<SyncGate>(remote(ws.urls, "workers"), &engine));
    if (per_worker)
      for (size_t i = 0; i < ws.urls.size(); ++i) engine.add_source(remote({ws.urls[i]}, "worker-" + std::to_string(i)));
    engine.run();
  }  // the sources write their accounting
  for (auto& w : workers) w->kill();
  auto r = summarize_worker_run(run_dir, std::max<int64_t>(1, o.steps / 4));
  r["mode"] = sync ? "sync" : "async";
  r["sources"] = sync ? "router" : o.sources;
  r["delay_ms"] = delay_ms;
  return r;
}

// The share of delivered completions the trainer dropped as stale.
double dropped_share(const nlohmann::json& run) {
  const int64_t delivered = run["accounting"].value("delivered_completions", int64_t(0));
  return delivered > 0 ? static_cast<double>(run["dropped_stale_total"].get<int64_t>()) / static_cast<double>(delivered)
                       : 0.0;
}

// Round 1 is reported in full; every round adds its four runs' ratios to "rounds", and "median"
// takes each figure's median over the rounds (runs of a few seconds on a shared machine swing).
nlohmann::json bench_straggler(const ClusterBenchOptions& o, const Scratch& s) {
  nlohmann::json out;
  auto ratio = [](const nlohmann::json& a, const nlohmann::json& b) {
    return b["steps_per_min"].get<double>() / std::max(1e-9, a["steps_per_min"].get<double>());
  };
  int delay = o.delay_ms;
  nlohmann::json rounds = nlohmann::json::array();
  std::map<std::string, std::vector<double>> figures;
  for (int round = 1; round <= std::max(1, o.rounds); ++round) {
    const std::string tag = round == 1 ? "" : "-" + std::to_string(round);
    auto healthy = straggler_run(o, s, "async-healthy" + tag, false, 0);
    // The straggler's answers take `slowdown` x a healthy batch's latency (round 1's).
    if (delay <= 0) delay = static_cast<int>(std::lround((o.slowdown - 1) * 1000 * healthy["rollout_s_mean"].get<double>()));
    delay = std::max(delay, 1);
    auto slow = straggler_run(o, s, "async-straggler" + tag, false, delay);
    auto sync_healthy = straggler_run(o, s, "sync-healthy" + tag, true, 0);
    auto sync_slow = straggler_run(o, s, "sync-straggler" + tag, true, delay);
    const nlohmann::json r = {{"straggler_ratio", ratio(healthy, slow)},
                              {"sync_straggler_ratio", ratio(sync_healthy, sync_slow)},
                              {"async_over_sync_healthy", ratio(sync_healthy, healthy)},
                              {"dropped_share_healthy", dropped_share(healthy)},
                              {"dropped_share_straggler", dropped_share(slow)}};
    for (const auto& [k, v] : r.items()) figures[k].push_back(v.get<double>());
    nlohmann::json violations = nlohmann::json::array();  // every run's accounting must hold
    for (const auto* run : {&healthy, &slow, &sync_healthy, &sync_slow})
      for (const auto& v : (*run)["accounting_violations"]) violations.push_back(v);
    rounds.push_back(r);
    rounds.back()["accounting_violations"] = violations;
    if (round > 1) continue;
    out["delay_ms"] = delay;
    out["healthy_rollout_s"] = healthy["rollout_s_mean"];
    out["async"] = {{"healthy", healthy}, {"straggler", slow}, {"ratio", r["straggler_ratio"]}};
    out["sync"] = {{"healthy", sync_healthy}, {"straggler", sync_slow}, {"ratio", r["sync_straggler_ratio"]}};
  }
  out["rounds"] = rounds;
  for (const auto& [k, v] : figures) out["median"][k] = median(v);
  out["target_ratio"] = 0.85;
  return out;
}

// Publishes adapter versions of rank r into the bucket and loads each on every worker through the
// router (all-or-nothing); the old version is unloaded after each (not timed).
nlohmann::json bench_adapters(const ClusterBenchOptions& o, const Scratch& s, cluster::Router& router) {
  auto m = model::from_pretrained(o.model_dir);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t r : o.ranks) {
    model::LoraConfig lc;
    lc.r = r;
    lc.lora_alpha = 2.0 * static_cast<double>(r);
    m->add_lora(lc);
    RunDirectory dir(path_join(s.bucket, "adapters-r" + std::to_string(r)));
    std::vector<double> total, publish, load;
    double bytes = 0;
    for (int i = 1; i <= o.repeats; ++i) {
      {
        torch::NoGradGuard ng;
        for (auto& p : m->lora_parameters()) p.normal_(0, 0.01);  // a new version's weights
      }
      const auto t0 = SteadyClock::now();
      const std::string d = dir.publish_adapter(i, [&](const std::string& t) { model::save_adapter(*m, t); }, 2);
      const double t_pub = seconds_since(t0);
      const std::string name = "bench-r" + std::to_string(r) + "-v" + std::to_string(i);
      router.load_adapter(name, d, "");
      total.push_back(seconds_since(t0));
      publish.push_back(t_pub);
      load.push_back(total.back() - t_pub);
      bytes = static_cast<double>(std::filesystem::file_size(path_join(d, model::kAdapterWeightsName)));
      router.unload_adapter(name);
    }
    rows.push_back({{"r", r}, {"adapter_bytes", bytes}, {"repeats", o.repeats},
                    {"p50_s", percentile(total, 0.5)}, {"p95_s", percentile(total, 0.95)},
                    {"publish_p50_s", percentile(publish, 0.5)}, {"load_p50_s", percentile(load, 0.5)},
                    {"load_p95_s", percentile(load, 0.95)}});
  }
  return rows;
}

// Completions per second through a router over the first n workers, for n = 1..W: groups of
// num_generations completions of one arithmetic prompt each (as a GRPO step asks), one warm-up
// round, then timed rounds.
nlohmann::json bench_scaling(const ClusterBenchOptions& o, const std::vector<std::string>& urls,
                             const std::string& token) {
  const auto tok = text::Tokenizer::load(o.model_dir);
  std::vector<cluster::CompletionRequest> reqs;
  for (int64_t i = 0; i < o.scaling_requests; ++i) {
    const int64_t g = i / o.num_generations;
    cluster::CompletionRequest c;
    const auto ids = tok.encode(std::to_string(10 + 7 * g) + "+" + std::to_string(3 + g) + "=");
    c.prompt.assign(ids.begin(), ids.end());
    c.max_tokens = o.max_completion_length;
    c.temperature = 1.0;
    c.seed = static_cast<uint64_t>(i);
    reqs.push_back(std::move(c));
  }
  nlohmann::json rows = nlohmann::json::array();
  for (size_t n = 1; n <= urls.size(); ++n) {
    cluster::RouterOptions ro;
    ro.token = token;
    cluster::Router router(ro);
    for (size_t i = 0; i < n; ++i) router.add_worker(urls[i]);
    check(router.wait_for_workers(static_cast<int>(n), 60) == static_cast<int>(n), "bench cluster",
          "not every worker came up for the scaling run");
    for (auto& c : reqs) c.model = router.base_model();
    router.complete(reqs, 600);  // warm-up
    int64_t done = 0, tokens = 0;
    const auto t0 = SteadyClock::now();
    for (int k = 0; k < o.scaling_rounds; ++k)
      for (const auto& out : router.complete(reqs, 600)) {
        done += out.ok ? 1 : 0;
        tokens += out.ok ? out.response.completion_tokens : 0;
      }
    const double dt = seconds_since(t0);
    check(done == o.scaling_rounds * o.scaling_requests, "bench cluster", "scaling: some completions failed");
    rows.push_back({{"workers", n}, {"completions_per_s", static_cast<double>(done) / dt},
                    {"tokens_per_s", static_cast<double>(tokens) / dt}, {"completions", done}, {"wall_s", dt}});
  }
  return rows;
}

}  // namespace

nlohmann::json bench_cluster(const ClusterBenchOptions& o) {
  check(QCoreApplication::instance() != nullptr, "bench cluster", "no QCoreApplication");
  check(o.workers >= 1 && o.workers <= 16, "--workers", "expected 1..16, got " + std::to_string(o.workers));
  check(o.steps >= 2, "--steps", "expected at least 2 steps");
  check(o.sources == "router" || o.sources == "per-worker", "--sources",
        "expected router or per-worker, got '" + o.sources + "'");
  for (const auto& p : o.parts)
    check(p == "straggler" || p == "adapters" || p == "scaling", "--parts",
          "unknown part '" + p + "'", "expected straggler, adapters, scaling");
  Scratch s;
  nlohmann::json r = {{"bench", "cluster"}, {"model", o.model_dir}, {"workers", o.workers},
                      {"threads_per_worker", o.threads}, {"cpu_cores", std::thread::hardware_concurrency()},
                      {"steps", o.steps}, {"prompts_per_step", o.prompts_per_step},
                      {"num_generations", o.num_generations}, {"max_completion_length", o.max_completion_length},
                      {"max_staleness", o.max_staleness}, {"routing", o.routing}};
  if (wants(o, "straggler")) r["straggler"] = bench_straggler(o, s);
  if (wants(o, "adapters") || wants(o, "scaling")) {
    auto workers = start_local_workers(s.worker_options(o), o.workers);
    const std::string token = cluster::read_token_file(s.token_file);
    if (wants(o, "adapters")) {
      cluster::RouterOptions ro;
      ro.token = token;
      cluster::Router router(ro);
      for (const auto& u : worker_urls(workers)) router.add_worker(u);
      check(router.wait_for_workers(o.workers, 60) == o.workers, "bench cluster", "not every worker came up");
      r["adapters"] = bench_adapters(o, s, router);
    }
    if (wants(o, "scaling")) r["scaling"] = bench_scaling(o, worker_urls(workers), token);
  }
  // Every engine run's accounting must hold.
  nlohmann::json violations = nlohmann::json::array();
  if (r.contains("straggler"))
    for (const auto& round : r["straggler"]["rounds"])
      for (const auto& v : round["accounting_violations"]) violations.push_back(v);
  r["accounting_ok"] = violations.empty();
  r["accounting_violations"] = violations;
  return r;
}

nlohmann::json bench_soak(const SoakBenchOptions& o) {
  check(QCoreApplication::instance() != nullptr, "bench soak", "no QCoreApplication");
  check(o.minutes > 0, "--minutes", "expected a positive number of minutes");
  check(o.workers >= 2 && o.workers <= 16, "--workers", "expected 2..16 (one is always left up), got " +
                                                            std::to_string(o.workers));
  check(o.kill_min_s > 0 && o.kill_min_s <= o.kill_max_s && o.down_min_s >= 0 && o.down_min_s <= o.down_max_s,
        "bench soak", "kill and down intervals must be positive ranges (min <= max)");
  Scratch s;
  auto workers = start_local_workers(s.worker_options(o), o.workers);
  const std::string run_dir = path_join(s.bucket, "run-soak");
  WorkerRunSettings ws;
  ws.model_dir = o.model_dir;
  ws.urls = worker_urls(workers);
  ws.token_file = s.token_file;
  ws.steps = 1000000000;  // stopped after `minutes`
  ws.prompts_per_step = o.prompts_per_step;
  ws.num_generations = o.num_generations;
  ws.max_completion_length = o.max_completion_length;
  auto cfg = worker_run_config(ws, run_dir);
  EngineOptions eo;
  eo.local_generators = 0;

  std::mt19937_64 rng(o.seed);
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  const double duration = o.minutes * 60;
  nlohmann::json rss = nlohmann::json::array(), kills = nlohmann::json::array();
  std::string failure;
  std::vector<double> back_at(workers.size(), -1);  // when a killed worker is started again
  {
    Engine engine(cfg, run_dir, eo);
    std::thread runner([&] {
      try {
        engine.run();
      } catch (const std::exception& e) {
        failure = e.what();
      }
    });
    const auto t0 = SteadyClock::now();
    double next_kill = uniform(o.kill_min_s, o.kill_max_s), next_sample = 0;
    while (seconds_since(t0) < duration && failure.empty() && engine.state() != EngineState::Finished &&
           engine.state() != EngineState::Failed) {
      const double t = seconds_since(t0);
      if (t >= next_sample) {
        int64_t worker_rss = 0;
        for (const auto& w : workers) worker_rss += w->running() ? resident_bytes(w->pid()) : 0;
        rss.push_back({{"t_s", std::round(t)}, {"step", engine.step()}, {"rss_mb", resident_bytes() / 1048576.0},
                       {"workers_rss_mb", worker_rss / 1048576.0}});
        next_sample += o.sample_s;
      }
      for (size_t i = 0; i < workers.size(); ++i)
        if (back_at[i] >= 0 && t >= back_at[i]) {
          workers[i]->start();
          back_at[i] = -1;
        }
      if (t >= next_kill) {
        std::vector<size_t> up;
        for (size_t i = 0; i < workers.size(); ++i)
          if (workers[i]->running()) up.push_back(i);
        if (up.size() >= 2) {
          const size_t i = up[std::uniform_int_distribution<size_t>(0, up.size() - 1)(rng)];
          workers[i]->kill();
          back_at[i] = t + uniform(o.down_min_s, o.down_max_s);
          kills.push_back({{"t_s", std::round(t * 10) / 10}, {"step", engine.step()}, {"worker", workers[i]->name()}});
        }
        next_kill = t + uniform(o.kill_min_s, o.kill_max_s);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    engine.stop();
    runner.join();
    rss.push_back({{"t_s", std::round(seconds_since(t0))}, {"step", engine.step()},
                   {"rss_mb", resident_bytes() / 1048576.0}, {"workers_rss_mb", nullptr}});
  }  // the remote source writes its accounting
  for (auto& w : workers) w->kill();
  check(failure.empty(), "bench soak", "the run failed: " + failure);

  auto r = summarize_worker_run(run_dir, 1);
  // Memory: the sample at the end of warm-up against the last one.
  size_t warm = 0;
  while (warm + 1 < rss.size() && rss[warm]["t_s"].get<double>() < o.warmup_frac * duration) ++warm;
  const double at_warm = rss[warm]["rss_mb"].get<double>(), at_end = rss.back()["rss_mb"].get<double>();
  double peak = at_warm;
  for (size_t i = warm; i < rss.size(); ++i) peak = std::max(peak, rss[i]["rss_mb"].get<double>());
  int64_t left = 0, joined = 0;
  for (const auto& e : RunFolder(run_dir).read_events(Malformed::Refuse)) {
    left += e.value("event", "") == "worker_left" ? 1 : 0;
    joined += e.value("event", "") == "worker_joined" ? 1 : 0;
  }
  const double growth = (at_end - at_warm) / std::max(1.0, at_warm);
  nlohmann::json out = {{"bench", "soak"}, {"minutes", o.minutes}, {"workers", o.workers}, {"seed", o.seed},
                        {"cpu_cores", std::thread::hardware_concurrency()}, {"steps", r["steps"]},
                        {"samples_trained", r["trained_completions"]}, {"samples_dropped_stale", r["dropped_stale_total"]},
                        {"samples_in_queues_at_end", r["in_queues_at_end"]}, {"samples_lost", r["samples_lost"]},
                        {"faults_survived", kills.size()}, {"worker_left_events", left},
                        {"worker_joined_events", joined}, {"steps_per_min", r["steps_per_min"]},
                        {"accounting", r["accounting"]}, {"accounting_violations", r["accounting_violations"]},
                        {"rss_mb_at_warmup_end", at_warm}, {"rss_mb_at_end", at_end}, {"rss_mb_peak_after_warmup", peak},
                        {"rss_growth_after_warmup", growth}, {"rss_flat", growth <= o.flat_tolerance},
                        {"kills", kills}, {"rss", rss}};
  out["ok"] = r["samples_lost"].get<int64_t>() == 0 && r["accounting_violations"].empty();
  return out;
}

}  // namespace grpo::run
