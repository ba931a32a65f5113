// The asynchronous engine on the embedded demo model: the staleness invariant under randomized
// producer delays (drops counted), queue bounds and back-pressure, pause holding the step count,
// retunes applied at a step boundary and logged (invalid ones change nothing), and resume from
// a checkpoint continuing the step count and version numbering, and admission keeping generation
// within what can still be trained (stale groups forced, then dropped).
#include <QtTest>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "core/records/catalogue.h"
#include "core/records/run_status.h"
#include "core/run/bounded_queue.h"
#include "core/run/checkpoint.h"
#include "core/run/engine.h"
#include "core/run/rollout_pipeline.h"
#include "core/run/run_setup.h"
#include "engine_test_util.h"

using namespace engine_test;
namespace run = grpo::run;

namespace {
// A rollout source that answers at once with the version it is told (and says so, as remote
// workers do), and checks admission at every call: the groups it was given are already counted,
// so more than the limit for its lag is a breach.
class InstantSource : public run::RolloutSource {
public:
  std::atomic<int64_t> version{0}, lag{0};
  std::atomic<bool> breached{false};
  const run::RolloutPipeline* pipeline = nullptr;
  std::string name() const override { return "instant"; }
  std::optional<int64_t> sampling_version() const override { return version.load(); }
  std::vector<run::RolloutResult> generate(const std::vector<run::RolloutRequest>& requests,
                                           const grpo::rollout::SamplingParams&) override {
    if (pipeline->outstanding_groups() > pipeline->admission_limit_groups(lag.load())) breached = true;
    std::vector<run::RolloutResult> out;
    for (const auto& r : requests) {
      run::RolloutResult res;
      res.group_id = r.group_id;
      res.policy_version = version.load();
      res.source = name();
      for (int64_t i = 0; i < r.n; ++i) res.completions.push_back({{17, 18}, {-0.5f, -0.25f}, "length"});
      out.push_back(std::move(res));
    }
    return out;
  }
  void on_version_published(int64_t, const std::string&) override {}
  int64_t tokens_generated() const override { return 0; }
};

// Waits (bounded) until pred() holds; returns whether it did.
template <class P>
bool wait_until(P pred, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}
}  // namespace

class TestEngine : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void boundedQueueBlocksAndCloses() {
    run::BoundedQueue<int> q(2);
    QVERIFY(q.push(1));
    QVERIFY(q.push(2));
    QVERIFY(q.full());
    double blocked = -1;
    std::atomic<bool> pushed{false};
    std::thread producer([&] { pushed = q.push(3, &blocked); });
    // Back-pressure, seen from the queue and not from a clock: the producer is inside push(),
    // waiting for room, and it cannot come out while the queue stays full.
    QVERIFY(wait_until([&] { return q.waiting_producers() == 1; }, 60));
    QVERIFY(!pushed.load());
    QCOMPARE(q.size(), size_t(2));
    QCOMPARE(*q.pop_for(std::chrono::milliseconds(10)), 1);
    producer.join();
    QVERIFY(pushed.load());
    QVERIFY(blocked >= 0);
    QCOMPARE(q.waiting_producers(), size_t(0));
    QCOMPARE(q.size(), size_t(2));
    q.close();
    QVERIFY(!q.push(4));
    QCOMPARE(*q.pop_for(std::chrono::milliseconds(1)), 2);  // drains after close
    QCOMPARE(*q.pop_for(std::chrono::milliseconds(1)), 3);
    QVERIFY(!q.pop_for(std::chrono::milliseconds(1)).has_value());
  }

  // The staleness bound holds whatever the generators' timing (random delays), and a stale group is
  // really dropped: that case is forced, not hoped for, so neither a fast trainer nor a loaded
  // machine can make the test vacuous.
  void stalenessInvariantUnderRandomDelays() {
    for (int max_staleness : {0, 1}) {
      QTemporaryDir dir;
      auto cfg = tiny_config(dir.path().toStdString());
      cfg.max_staleness = max_staleness;
      cfg.max_steps = 5;
      cfg.save_steps = 0;
      cfg.weight_sync_steps = 1;              // a new policy version after every step
      cfg.queue_maxsize = 3 * cfg.num_generations;  // the rollout queue holds 3 groups
      QCOMPARE(cfg.prompts_per_step, int64_t(2));
      run::EngineOptions opts;
      opts.local_generators = 2;
      std::mt19937 rng(max_staleness + 11);
      std::mutex rng_mu;
      // Each generator waits 0-250 ms at random before each generation.
      opts.before_generate = [&](const std::string&) {
        int ms;
        {
          std::lock_guard<std::mutex> lock(rng_mu);
          ms = static_cast<int>(rng() % 250);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      };
      run::Engine engine(cfg, cfg.output_dir, opts);
      // After step 1 has published policy v1, the trainer holds until admission's limit of groups
      // (one batch, 2 groups, for max_staleness 0 and 1) is queued, each generated from v0 or v1:
      // step 2 (under v1) drops the v0 ones when max_staleness is 0. Forced drops are checked in
      // admissionKeepsGenerationWithinStaleness.
      bool filled = true;
      engine.run([&](const run::StepReport& r) {
        if (r.step == 1) filled = wait_until([&] { return engine.queued_groups() >= 2; }, 300);
      });
      QVERIFY2(filled, "the rollout queue never held 2 groups while the trainer waited");
      auto metrics = read_jsonl(cfg.output_dir + "/metrics.jsonl");
      QCOMPARE(metrics.size(), size_t(5));
      double dropped = 0;
      for (const auto& m : metrics) {
        QVERIFY2(m["sample/staleness_max"].get<double>() <= max_staleness, m.dump().c_str());
        dropped += m["sample/dropped_stale_total"].get<double>();
      }
      qInfo("max_staleness %d: %g samples dropped as stale", max_staleness, dropped);
      auto finished = events_named(cfg.output_dir, "finished");
      QCOMPARE(finished.size(), size_t(1));
      QCOMPARE(finished[0]["dropped_stale_total"].get<double>(), dropped);
    }
  }

  // Admission (docs/formulas.md): producers start a group only while it can be trained within
  // max_staleness versions, counted in whole batches ahead of it; what is stale anyway is dropped.
  void admissionKeepsGenerationWithinStaleness() {
    QTemporaryDir dir;
    auto cfg = tiny_config(dir.path().toStdString());
    cfg.max_staleness = 1;
    cfg.weight_sync_steps = 1;
    cfg.queue_maxsize = 64;  // 16 groups: the queue never binds here
    cfg.max_inflight_tasks = 64;
    auto setup = run::prepare_run(cfg, true);
    std::mutex rewards_mu;
    run::PipelineOptions po;
    po.policy = &setup.policy;
    po.stream = setup.stream.get();
    po.rewards = &setup.rewards;
    po.rewards_mutex = &rewards_mu;
    run::RolloutPipeline pipeline(setup.config, po);
    std::vector<std::unique_ptr<run::RolloutSource>> sources;
    auto* source = new InstantSource;
    source->pipeline = &pipeline;
    sources.emplace_back(source);
    pipeline.start(sources);
    // S = 1, W = 1, mu = 1, r = 0: floor((2 - 1 - 0) / 1) = 1 batch of P = 2 groups.
    QCOMPARE(pipeline.admission_limit_groups(), int64_t(2));
    QVERIFY(wait_until([&] { return pipeline.queued_groups() == 2; }, 60));
    QCOMPARE(pipeline.outstanding_groups(), int64_t(2));

    // Publishing every 3 steps, 2 steps since the last: floor((2 * 3 - 1 - 2) / 1) = 3 batches;
    // right after a publish (r = 0), 5 batches.
    auto next = std::make_shared<grpo::grpo::TrainConfig>(*setup.config);
    next->weight_sync_steps = 3;
    pipeline.set_trainer_step(5, 0);
    pipeline.set_config(next);
    QCOMPARE(pipeline.admission_limit_groups(), int64_t(6));
    QVERIFY(wait_until([&] { return pipeline.queued_groups() == 6; }, 60));
    pipeline.set_trainer_step(6, 0);
    QCOMPARE(pipeline.admission_limit_groups(), int64_t(10));
    QVERIFY(wait_until([&] { return pipeline.queued_groups() == 10; }, 60));
    QCOMPARE(pipeline.outstanding_groups(), int64_t(10));

    // Taking a batch frees its room at once.
    std::map<std::string, double> m;
    auto taken = pipeline.collect(2, 0, 1, m);
    QCOMPARE(taken.size(), size_t(2));
    QCOMPARE(m.at("sample/dropped_stale_total"), 0.0);
    QVERIFY(wait_until([&] { return pipeline.queued_groups() == 10; }, 60));

    // Version 1 is published and the source still samples with version 0: one version less of
    // room, floor(((2 - 1) * 3 - 1 - 0) / 1) = 2 batches. Nothing starts until the queue is down
    // to 4 groups, and then it fills to 4 again.
    source->lag = 1;
    pipeline.set_trainer_step(6, 1);
    QCOMPARE(pipeline.admission_limit_groups(1), int64_t(4));
    for (int b = 0; b < 4; ++b) {
      m.clear();
      QCOMPARE(pipeline.collect(2, 1, 1, m).size(), size_t(2));
      QCOMPARE(m.at("sample/dropped_stale_total"), 0.0);  // one version old: kept
    }
    QVERIFY(wait_until([&] { return pipeline.queued_groups() == 4; }, 60));
    QCOMPARE(pipeline.outstanding_groups(), int64_t(4));

    // Versions move on beyond what admission assumed (the trainer's 2 where the source said 0):
    // what is queued is 2 versions old, dropped, and the batch is made of groups sampled at 2.
    source->version = 2;
    source->lag = 0;
    m.clear();
    taken = pipeline.collect(2, 2, 1, m);
    QCOMPARE(taken.size(), size_t(2));
    for (const auto& g : taken) QCOMPARE(g->result.policy_version, int64_t(2));
    QVERIFY2(m.at("sample/dropped_stale_total") >= 4 * cfg.num_generations,
             std::to_string(m.at("sample/dropped_stale_total")).c_str());
    QVERIFY(!source->breached.load());
    pipeline.stop();
    pipeline.join();
  }

  void queueStaysWithinBound() {
    QTemporaryDir dir;
    auto cfg = tiny_config(dir.path().toStdString());
    cfg.queue_maxsize = 4;  // one group of G = 4
    cfg.max_steps = 3;
    cfg.save_steps = 0;
    run::EngineOptions opts;
    opts.local_generators = 2;
    run::Engine engine(cfg, cfg.output_dir, opts);
    engine.run();
    for (const auto& m : read_jsonl(cfg.output_dir + "/metrics.jsonl")) {
      QVERIFY(m["sample/rollout_queue_size"].get<double>() <= 1.0);
      QVERIFY(m.contains("rollout/backpressure_s") || m.contains("rollout/score_block_s"));
      QVERIFY(m.contains("verdict"));
      QVERIFY2(m["rollout/outstanding_groups"].get<double>() <= m["rollout/admission_limit_groups"].get<double>(),
               m.dump().c_str());
      // MFU against the GEMM rate measured at start: a real fraction, and the wall-clock one (idle
      // time included) never above the compute-time one.
      const double fb = m.value("perf/mfu_fwd_bwd", -1.0), wall = m.value("perf/mfu_wall_clock", -1.0);
      QVERIFY2(fb > 0 && fb < 1.5 && wall > 0 && wall <= fb * (1 + 1e-9), m.dump().c_str());
    }
    auto start = events_named(cfg.output_dir, "start");
    QCOMPARE(start.size(), size_t(1));
    QVERIFY(start[0]["mfu_peak_tflops"].get<double>() > 0);
    QCOMPARE(start[0]["mfu_peak"].get<std::string>(), std::string("measured"));
  }

  void pauseHoldsTheStepCount() {
    QTemporaryDir dir;
    auto cfg = tiny_config(dir.path().toStdString());
    cfg.max_steps = 4;
    run::Engine engine(cfg, cfg.output_dir);
    std::thread t([&] {
      engine.run([&](const run::StepReport& r) {
        if (r.step == 2) engine.pause();
      });
    });
    QVERIFY(wait_until([&] { return engine.state() == run::EngineState::Paused; }, 120));
    const int64_t held = engine.step();
    QCOMPARE(held, int64_t(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    QCOMPARE(engine.step(), held);  // paused: no step happens
    // `grpo status` sees it from the files alone, while the run is live.
    auto status = run::read_run_status(cfg.output_dir);
    QCOMPARE(status["state"].get<std::string>(), std::string("paused"));
    QCOMPARE(status["step"].get<int64_t>(), int64_t(2));
    engine.resume();
    QVERIFY(wait_until([&] { return engine.state() == run::EngineState::Finished; }, 300));
    t.join();
    QCOMPARE(engine.step(), int64_t(4));
    QCOMPARE(events_named(cfg.output_dir, "pause").size(), size_t(1));
    auto done = run::read_run_status(cfg.output_dir);
    QCOMPARE(done["state"].get<std::string>(), std::string("finished"));
    QCOMPARE(done["step"].get<int64_t>(), int64_t(4));
    QCOMPARE(done["policy_version"].get<int64_t>(), engine.policy_version());
    QVERIFY(QString::fromStdString(run::format_run_status(done)).contains("finished"));
    QCOMPARE(events_named(cfg.output_dir, "resume").size(), size_t(1));
  }

  void retuneAppliesAtAStepBoundaryAndIsLogged() {
    QTemporaryDir dir;
    auto cfg = tiny_config(dir.path().toStdString());
    cfg.max_steps = 4;
    run::Engine engine(cfg, cfg.output_dir);
    // Invalid retunes are refused with a reason and change nothing.
    QString bad = QString::fromStdString(engine.retune({{"temperature", -1.0}}));
    QVERIFY2(bad.contains("temperature") && bad.contains("-1"), qPrintable(bad));
    QVERIFY(QString::fromStdString(engine.retune({{"r", 4}})).contains("cannot change"));
    QVERIFY(QString::fromStdString(engine.retune({{"learnig_rate", 0.1}})).contains("unknown key"));
    QVERIFY(QString::fromStdString(engine.retune({{"reward_weights", {1.0, 2.0}}})).contains("reward_weights"));
    // Issue 18: a completion longer than the model's context made every KV cache allocation fail.
    bad = QString::fromStdString(engine.retune({{"max_completion_length", 1 << 20}}));
    QVERIFY2(bad.contains("max_completion_length") && bad.contains("max_position_embeddings 512"), qPrintable(bad));
    std::string accepted;
    engine.run([&](const run::StepReport& r) {
      if (r.step == 2) accepted = engine.retune({{"learning_rate", 0.02}, {"temperature", 0.7}});
    });
    QCOMPARE(accepted, std::string());
    auto retunes = events_named(cfg.output_dir, "retune");
    QCOMPARE(retunes.size(), size_t(1));
    QCOMPARE(retunes[0]["applied_at_step"].get<int64_t>(), int64_t(3));
    QCOMPARE(retunes[0]["old"]["learning_rate"].get<double>(), 1e-3);
    QCOMPARE(retunes[0]["new"]["learning_rate"].get<double>(), 0.02);
    auto metrics = read_jsonl(cfg.output_dir + "/metrics.jsonl");
    QCOMPARE(metrics[1]["learning_rate"].get<double>(), 1e-3);
    QCOMPARE(metrics[2]["learning_rate"].get<double>(), 0.02);  // visible in the metrics from step 3
    QCOMPARE(engine.config().temperature, 0.7);
    // The catalogue (core/records/catalogue.h) knows every metric and event kind this run wrote, so
    // both views can give each its unit, group, label and severity.
    const std::set<std::string> own = {"step", "time", "policy_version", "verdict"};
    std::set<std::string> missing;
    for (const auto& m : metrics)
      for (const auto& [k, v] : m.items())
        if (!own.count(k) && !run::find_metric(k)) missing.insert(k);
    std::string names;
    for (const auto& k : missing) names += " " + k;
    QVERIFY2(missing.empty(), ("metrics not in the catalogue:" + names).c_str());
    for (const auto& e : read_jsonl(cfg.output_dir + "/events.jsonl"))
      QVERIFY2(run::find_event_kind(e.value("event", "")), ("event kind not in the catalogue: " + e.dump()).c_str());
  }

  void resumeContinuesStepsAndVersions() {
    QTemporaryDir dir;
    auto cfg = tiny_config(dir.path().toStdString());
    cfg.max_steps = 4;
    cfg.save_steps = 2;
    {
      run::Engine engine(cfg, cfg.output_dir);
      engine.run();
    }
    const auto versions_before = grpo::run::RunDirectory(cfg.output_dir).adapter_versions();
    // The trainer's controller state travels in state.json (restored by the resume below).
    const auto saved = run::find_latest_checkpoint(cfg.output_dir);
    QVERIFY(saved && saved->state.trainer.contains("entropy_coef") && saved->state.trainer.contains("last_world_entropy"));
    cfg.max_steps = 7;
    run::EngineOptions opts;
    opts.resume = true;
    run::Engine engine(cfg, cfg.output_dir, opts);
    QCOMPARE(engine.step(), int64_t(4));  // the final checkpoint of the first run
    engine.run();
    auto metrics = read_jsonl(cfg.output_dir + "/metrics.jsonl");
    QCOMPARE(metrics.size(), size_t(7));
    for (size_t i = 0; i < metrics.size(); ++i) QCOMPARE(metrics[i]["step"].get<int64_t>(), int64_t(i + 1));
    const auto versions = grpo::run::RunDirectory(cfg.output_dir).adapter_versions();
    QVERIFY(versions.back() > versions_before.back());  // numbering continues, names never reused
    auto resumes = events_named(cfg.output_dir, "resume");
    QVERIFY(!resumes.empty() && resumes.back()["step"].get<int64_t>() == 4);
    // Event identities go on across the resume: the seqs in the file are 0..n-1, each once (threads
    // may write two events in the other order than they were numbered).
    std::set<int64_t> seqs;
    size_t with_seq = 0;
    for (const auto& e : read_jsonl(cfg.output_dir + "/events.jsonl")) {
      if (!e.contains("seq")) continue;
      ++with_seq;
      seqs.insert(e["seq"].get<int64_t>());
    }
    QCOMPARE(seqs.size(), with_seq);
    QVERIFY2(seqs.size() > 4 && *seqs.begin() == 0 && *seqs.rbegin() == int64_t(seqs.size()) - 1,
             std::to_string(seqs.size()).c_str());
  }

  // num_iterations 2 (TRL's mu): four optimizer steps train two batches, each twice in a row. The
  // batch's intake, rewards and traces are logged at its first step only; the proximal correction
  // runs end to end (its gap is logged on both steps of a batch).
  void numIterationsTrainsEachBatchTwice() {
    QTemporaryDir dir;
    auto cfg = tiny_config(dir.path().toStdString());
    cfg.max_steps = 4;
    cfg.save_steps = 0;
    cfg.num_iterations = 2;
    cfg.vllm_importance_sampling_correction = true;
    run::Engine engine(cfg, cfg.output_dir);
    engine.run();
    auto metrics = read_jsonl(cfg.output_dir + "/metrics.jsonl");
    QCOMPARE(metrics.size(), size_t(4));
    for (size_t i = 0; i < metrics.size(); ++i) {
      const auto& m = metrics[i];
      const bool first = i % 2 == 0;
      QCOMPARE(m["step"].get<int64_t>(), int64_t(i + 1));
      QCOMPARE(m["batch/reuse_pass"].get<double>(), first ? 0.0 : 1.0);
      QCOMPARE(m.contains("reward"), first);
      QCOMPARE(m.contains("sample/staleness_mean"), first);
      QVERIFY2(m.contains("sampling/sampling_logp_difference/mean") && m.contains("loss"), m.dump().c_str());
    }
  }

  void tornNewestCheckpointFallsBackToThePreviousOne() {
    QTemporaryDir dir;
    auto cfg = tiny_config(dir.path().toStdString());
    cfg.max_steps = 4;
    cfg.save_steps = 2;
    {
      run::Engine engine(cfg, cfg.output_dir);
      engine.run();
    }
    // Tear the newest checkpoint (step 4): truncate its optimizer state.
    const std::string newest = cfg.output_dir + "/checkpoints/step-4/optimizer.pt";
    QVERIFY(grpo::file_exists(newest));
    std::string bytes = grpo::read_file(newest);
    grpo::write_file_atomic(newest, bytes.substr(0, bytes.size() / 2));
    auto found = run::find_latest_checkpoint(cfg.output_dir);
    QVERIFY(found.has_value());
    QCOMPARE(found->state.step, int64_t(2));
    QCOMPARE(found->skipped.size(), size_t(1));
    run::EngineOptions opts;
    opts.resume = true;
    run::Engine engine(cfg, cfg.output_dir, opts);
    QCOMPARE(engine.step(), int64_t(2));
    engine.run();
    auto metrics = read_jsonl(cfg.output_dir + "/metrics.jsonl");
    QCOMPARE(metrics.size(), size_t(4));
    QCOMPARE(metrics.back()["step"].get<int64_t>(), int64_t(4));
    QVERIFY(!events_named(cfg.output_dir, "warning").empty());
  }
};

QTEST_GUILESS_MAIN(TestEngine)
#include "test_engine.moc"
