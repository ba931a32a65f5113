// Shared helpers for the engine tests: a small, fast run config on the embedded demo model,
// readers for a run directory's JSONL files, and (for the tests with remote workers) real
// `grpo worker` processes, an engine run on a side thread while this one serves Qt events, and
// the accounting identities of a run with workers.
#pragma once

#include "tests/common/test_paths.h"
#include <QProcess>
#include <QStringList>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster/cluster_token.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/grpo/config.h"
#include "core/run/engine.h"
#include "tests/common/child_process.h"

namespace engine_test {

inline grpo::grpo::TrainConfig tiny_config(const std::string& run_dir) {
  grpo::grpo::TrainConfig c;
  c.apply({{"model_name_or_path", std::string(GRPO_RESOURCES) + "/models/tiny-arith"},
           {"task", "arith"}, {"task_difficulty", 1}, {"seed", 7},
           {"num_generations", 4}, {"prompts_per_step", 2}, {"max_completion_length", 4},
           {"max_prompt_length", 48}, {"learning_rate", 1e-3}, {"r", 4}, {"lora_alpha", 8},
           {"per_device_train_batch_size", 8}, {"max_steps", 6}, {"eval_steps", 0}, {"eval_size", 8},
           {"save_steps", 2}, {"queue_maxsize", 32}, {"max_staleness", 2}},
          "test");
  c.output_dir = run_dir;
  return c;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  if (!grpo::file_exists(path)) return out;
  for (const auto& line : grpo::split(grpo::read_file(path), '\n'))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

inline std::vector<nlohmann::json> events_named(const std::string& run_dir, const std::string& name) {
  std::vector<nlohmann::json> out;
  for (auto& e : read_jsonl(run_dir + "/events.jsonl"))
    if (e.value("event", "") == name) out.push_back(e);
  return out;
}

// ---------------------------------------------------------------- remote workers

// A temporary bucket holding a run directory and a cluster token file.
struct Scratch {
  QTemporaryDir tmp;
  std::string bucket = tmp.path().toStdString();
  std::string run_dir = bucket + "/run";
  std::string token_file = bucket + "/cluster-token";
  std::string token = grpo::cluster::load_or_create_token(token_file);
};

// A `grpo worker` child process (killed and reaped when this leaves scope).
struct WorkerProcess {
  std::unique_ptr<grpo::testing::ChildProcess> child = std::make_unique<grpo::testing::ChildProcess>();
  std::string url;  // "" when it did not come up
  int port = 0;
  QProcess& p() { return child->p; }
  void kill() {
    if (p().state() == QProcess::NotRunning) return;
    p().kill();
    p().waitForFinished(10000);
  }
};

// Starts `grpo worker` on the demo model (port 0: any free port) and waits (bounded) for its
// "listening on URL" line. Its stderr goes to TOKEN_FILE-NAME.log (a pipe nobody reads could fill).
inline WorkerProcess start_worker(const std::string& bucket, const std::string& token_file, int port,
                                  const std::string& name, const QStringList& extra = {}) {
  WorkerProcess w;
  QProcess& p = w.p();
  p.setStandardErrorFile(QString::fromStdString(token_file + "-" + name + ".log"), QIODevice::Append);
  p.start(GRPO_CLI, QStringList{"worker", "--model", QString(GRPO_RESOURCES) + "/models/tiny-arith", "--listen",
                                QString("127.0.0.1:%1").arg(port), "--token-file", QString::fromStdString(token_file),
                                "--bucket", QString::fromStdString(bucket), "--threads", "1", "--name",
                                QString::fromStdString(name)} + extra);
  if (!p.waitForStarted(10000)) return w;
  const QString url = grpo::testing::wait_for_announced_url(p, "listening on ", 60);
  w.url = url.toStdString();
  w.port = QUrl(url).port();
  return w;
}

// The id the workers serve the base model under (their --model, as start_worker passes it).
inline std::string worker_base_model() { return std::string(GRPO_RESOURCES) + "/models/tiny-arith"; }

// A small run whose rollouts all come from `urls` (no local generator).
inline grpo::grpo::TrainConfig worker_config(const std::string& run_dir, const std::vector<std::string>& urls,
                                             const std::string& token_file, int64_t steps) {
  auto cfg = tiny_config(run_dir);
  cfg.max_steps = steps;
  cfg.save_steps = 0;
  cfg.weight_sync_steps = 2;
  cfg.max_completion_length = 16;
  cfg.local_generators = 0;
  cfg.worker_urls = urls;
  cfg.cluster_token_file = token_file;
  cfg.worker_timeout_s = 30;
  return cfg;
}

// Runs `engine` to its end on a side thread while this thread serves Qt events (stub workers
// live here) and calls `watch` every 10 ms; gives up (stops the engine) after `max_seconds`.
// `on_step` is Engine::run's (the trainer thread, after each step). Returns the run's exception
// text, or "" when it ended normally.
template <class Watch>
std::string run_engine(grpo::run::Engine& engine, Watch watch, int max_seconds = 300,
                       const std::function<void(const grpo::run::StepReport&)>& on_step = {}) {
  std::string failure;
  std::atomic<bool> done{false};
  std::thread runner([&] {
    try {
      engine.run(on_step);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(max_seconds);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    watch();
    QTest::qWait(10);
  }
  const bool timed_out = !done;
  if (timed_out) engine.stop();
  runner.join();
  if (timed_out && failure.empty()) failure = "the run did not end within " + std::to_string(max_seconds) + " s";
  return failure;
}

// A whole run with workers alone (no local generator) through run_engine; "" when it ended
// normally at max_steps. The engine is gone on return, so the accounting event is written.
inline std::string run_with_workers(const grpo::grpo::TrainConfig& cfg, const std::string& run_dir,
                                    grpo::run::EngineOptions eo = {}) {
  eo.local_generators = 0;
  grpo::run::Engine engine(cfg, run_dir, eo);
  std::string failure = run_engine(engine, [] {});
  if (failure.empty() && engine.step() != cfg.max_steps)
    failure = "the run ended at step " + std::to_string(engine.step()) + " of " + std::to_string(cfg.max_steps);
  return failure;
}

// The accounting of a finished run with workers (its one remote_accounting event, its finished
// event): every dispatched request ended exactly once (answered, re-dispatched after a failure,
// refused or cancelled), every request was answered or given up, no group reached the trainer
// twice, every answered completion was delivered or discarded with its failed batch, and every
// delivered completion was trained, dropped as stale, or still queued at the end (bounded by the
// queues' capacity). Returns what broke ("" when all holds); `acc` receives the accounting.
inline std::string accounting_problems(const std::string& run_dir, const grpo::grpo::TrainConfig& cfg,
                                       nlohmann::json* acc = nullptr) {
  const auto acc_ev = events_named(run_dir, "remote_accounting");
  if (acc_ev.size() != 1) return std::to_string(acc_ev.size()) + " remote_accounting events, expected 1";
  const auto a = acc_ev[0]["accounting"];
  if (acc) *acc = a;
  const auto r = a["router"];
  auto n = [](const nlohmann::json& j, const char* k) { return j.at(k).get<int64_t>(); };
  const std::string text = " in " + a.dump();
  if (n(r, "dispatched") != n(r, "completed") + n(r, "redispatched") + n(r, "rejected") + n(r, "cancelled"))
    return "dispatched != completed + redispatched + rejected + cancelled" + text;
  if (n(r, "requests") != n(r, "completed") + n(r, "abandoned") + r.value("withdrawn", int64_t{0}))
    return "requests != completed + abandoned + withdrawn" + text;
  if (n(a, "duplicate_groups") != 0) return "a group reached the trainer twice" + text;
  if (n(a, "delivered_completions") + n(a, "discarded_completions") != n(r, "completed"))
    return "delivered + discarded != completed" + text;
  const auto finished = events_named(run_dir, "finished");
  if (finished.size() != 1) return std::to_string(finished.size()) + " finished events, expected 1";
  const int64_t G = cfg.num_generations;
  const int64_t trained = cfg.max_steps * cfg.prompts_per_step * G;
  const int64_t dropped = finished[0]["dropped_stale_total"].get<int64_t>();
  const int64_t leftover = n(a, "delivered_completions") - trained - dropped;
  const int64_t queue_groups = std::max<int64_t>(1, (cfg.queue_maxsize + G - 1) / G) +
                               std::max<int64_t>(2, cfg.prompts_per_step) + cfg.prompts_per_step;
  if (leftover < 0 || leftover > queue_groups * G)
    return "delivered - trained - dropped stale = " + std::to_string(leftover) + ", expected 0.." +
           std::to_string(queue_groups * G) + text;
  return "";
}

// How many of `events` concern the worker at `url`.
inline int count_for(const std::vector<nlohmann::json>& events, const std::string& url) {
  int k = 0;
  for (const auto& e : events) k += e.value("url", "") == url ? 1 : 0;
  return k;
}

// "" when `e` follows the fault convention (severity, a message naming `url`, advice).
inline std::string fault_shape_problems(const nlohmann::json& e, const std::string& url) {
  const std::string sev = e.value("severity", "");
  if (sev != "warning" && sev != "error") return "no severity in " + e.dump();
  if (e.value("message", "").find(url) == std::string::npos) return "message does not name " + url + ": " + e.dump();
  if (e.value("advice", "").empty()) return "no advice in " + e.dump();
  if (!e.contains("time")) return "no time in " + e.dump();
  return "";
}

}  // namespace engine_test
