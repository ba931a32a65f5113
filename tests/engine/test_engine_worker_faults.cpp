// Worker faults during a real run on loopback (issue 8 §2), each with real `grpo worker`
// processes carrying the run:
// - a worker that cannot read the bucket (its --bucket is another directory, which never receives
//   the adapters: the same failure as an unreadable mount, and one that also fails as root, where
//   chmod stops nothing): its load answer names the adapter's path, the router takes it out instead
//   of failing the load on every worker, the others carry the run, and "bucket_unreadable" is an
//   event with severity, message and advice;
// - workers that answer garbage (malformed JSON, wrong shapes, token ids the model does not have)
//   or report the wrong adapter hash
//   (the named test seam tests/cluster/stub_worker.h stands in for them): quarantined, their
//   requests dispatched elsewhere, "worker_quarantined" events; the run completes;
// - slow workers (grpo worker --inject-delay-ms), one slower than the router's timeout: nothing
//   changes for correctness.
// After each run the accounting identities hold (engine_test_util.h, accounting_problems):
// nothing lost, nothing trained twice.
#include <QNetworkAccessManager>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QtTest>

#include <atomic>
#include <mutex>
#include <thread>
#include <chrono>
#include <filesystem>
#include <unistd.h>

#include "core/cluster/cluster_token.h"
#include "core/cluster/worker_client.h"
#include "core/common/files.h"
#include "core/records/catalogue.h"
#include "core/records/run_status.h"
#include "core/run/engine.h"
#include "core/run/remote_source.h"
#include "engine_test_util.h"
#include "tests/cluster/stub_worker.h"

using namespace engine_test;

namespace {

std::string first_problem(const std::vector<nlohmann::json>& events, const std::string& url) {
  for (const auto& e : events)
    if (e.value("url", "") == url)
      if (auto p = fault_shape_problems(e, url); !p.empty()) return p;
  return "";
}

}  // namespace

class TestEngineWorkerFaults : public QObject {
  Q_OBJECT
private Q_SLOTS:
  // No worker answers (the only URL refuses connections): the remote source says so as a warning
  // with advice, never as "error" (run_state_after folds "error" into failed, and `grpo status`
  // said "failed" for a run that went on), and the run carries on with its local generator. Forced,
  // not timed: the local generator waits (bounded) until the source has warned.
  void noWorkerIsAWarningNotAFailure() {
    QTemporaryDir dir;
    const std::string run_dir = dir.path().toStdString() + "/run", token_file = dir.path().toStdString() + "/token";
    QTcpServer probe;
    QVERIFY(probe.listen(QHostAddress::LocalHost, 0));
    const int port = probe.serverPort();
    probe.close();  // nothing listens there now: every connection is refused
    auto cfg = worker_config(run_dir, {"http://127.0.0.1:" + std::to_string(port)}, token_file, 3);
    auto opts = grpo::run::remote_options_from_config(cfg, run_dir);
    opts.wait_for_workers_s = 0.2;
    std::mutex mu;
    std::vector<nlohmann::json> seen;
    std::atomic<bool> warned{false};
    opts.on_event = [&](const nlohmann::json& e) {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(e);
      if (e.value("event", "") == "warning") warned = true;
    };
    cfg.worker_urls.clear();  // the source is added by hand, with its short wait
    grpo::run::EngineOptions eo;
    eo.local_generators = 1;
    eo.before_generate = [&](const std::string& source) {
      if (source.rfind("local", 0) != 0) return;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!warned.load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    };
    {
      grpo::run::Engine engine(cfg, run_dir, eo);
      engine.add_source(std::make_unique<grpo::run::RemoteSource>(std::move(opts)));
      const std::string failure = run_engine(engine, [] {});
      QVERIFY2(failure.empty(), failure.c_str());
      QCOMPARE(engine.step(), cfg.max_steps);
    }
    QVERIFY(warned.load());
    std::lock_guard<std::mutex> lock(mu);
    std::string state = "running";
    for (const auto& e : seen) {
      QVERIFY2(e.value("event", "") != "error", e.dump().c_str());
      if (e.value("event", "") == "warning") {
        QCOMPARE(e.value("severity", ""), std::string("warning"));
        QVERIFY2(!e.value("advice", "").empty(), e.dump().c_str());
        QVERIFY(grpo::run::event_is_marker(e));  // a fault: listed and marked on the charts
      }
      state = grpo::run::run_state_after(state, e);
    }
    QCOMPARE(state, std::string("running"));
    QCOMPARE(grpo::run::read_run_status(run_dir).value("state", ""), std::string("finished"));
  }

  void workerThatCannotReadTheBucketIsRoutedAround() {
    Scratch sc;
    const std::string &bucket = sc.bucket, &run_dir = sc.run_dir, &token_file = sc.token_file, &token = sc.token;
    QTemporaryDir other;  // c's bucket: outside the trainer's
    const std::string elsewhere = other.path().toStdString();
    WorkerProcess a = start_worker(bucket, token_file, 0, "wa");
    WorkerProcess b = start_worker(bucket, token_file, 0, "wb");
    WorkerProcess c = start_worker(elsewhere, token_file, 0, "wc");  // never sees the adapters
    QVERIFY2(!a.url.empty() && !b.url.empty() && !c.url.empty(), "grpo worker did not print its URL");

    const auto cfg = worker_config(run_dir, {a.url, b.url, c.url}, token_file, 8);
    const std::string failure = run_with_workers(cfg, run_dir);
    QVERIFY2(failure.empty(), failure.c_str());
    QCOMPARE(read_jsonl(run_dir + "/metrics.jsonl").size(), size_t(cfg.max_steps));
    // Every version was loaded (on a and b): no load failed for everyone, nothing rolled back.
    QVERIFY(events_named(run_dir, "adapter_load_failed").empty());
    for (const auto& e : events_named(run_dir, "warning"))
      QVERIFY2(e.value("message", "").find("failed to load") == std::string::npos, e.dump().c_str());
    QNetworkAccessManager nam;
    grpo::cluster::WorkerClient ca(&nam, a.url, token), cc(&nam, c.url, token);
    const auto models = ca.get_sync("/v1/models", 10);
    QVERIFY2(models.ok() && models.body.find("policy-v") != std::string::npos, models.describe().c_str());
    // c reported it, once, naming the adapter's path; a and b did not.
    const auto unreadable = events_named(run_dir, "bucket_unreadable");
    QCOMPARE(count_for(unreadable, c.url), 1);
    QCOMPARE(int(unreadable.size()), 1);
    QVERIFY2(first_problem(unreadable, c.url).empty(), first_problem(unreadable, c.url).c_str());
    QVERIFY2(unreadable[0]["message"].get<std::string>().find(run_dir + "/adapters/policy-v") != std::string::npos,
             unreadable[0].dump().c_str());
    QCOMPARE(count_for(events_named(run_dir, "worker_left"), c.url), 1);
    QCOMPARE(count_for(events_named(run_dir, "worker_left"), a.url) + count_for(events_named(run_dir, "worker_left"), b.url), 0);
    // Its own answer to such a load: an error naming the path, and it keeps serving.
    const std::string adapter = run_dir + "/adapters/policy-v1";
    const auto refused = cc.post_sync("/v1/load_lora_adapter", {{"lora_name", "x"}, {"lora_path", adapter}}, 10);
    QCOMPARE(refused.status, 400);
    QVERIFY2(refused.body.find(adapter) != std::string::npos, refused.body.c_str());
    QVERIFY(cc.get_sync("/health", 10).ok());
    // A folder this worker may not read (only where permissions bind: not as root) is named too.
    if (::geteuid() != 0) {
      std::filesystem::permissions(adapter, std::filesystem::perms::none);
      const auto denied = ca.post_sync("/v1/load_lora_adapter", {{"lora_name", "y"}, {"lora_path", adapter}}, 10);
      std::filesystem::permissions(adapter, std::filesystem::perms::owner_all);
      QCOMPARE(denied.status, 400);
      QVERIFY2(denied.body.find("cannot read " + adapter) != std::string::npos, denied.body.c_str());
    }
    for (auto* w : {&a, &b, &c}) w->kill();
    const std::string problems = accounting_problems(run_dir, cfg);
    QVERIFY2(problems.empty(), problems.c_str());
  }

  void garbageAndWrongWeightsAreQuarantined() {
    Scratch sc;
    const std::string &bucket = sc.bucket, &run_dir = sc.run_dir, &token_file = sc.token_file, &token = sc.token;
    WorkerProcess a = start_worker(bucket, token_file, 0, "wa");
    WorkerProcess b = start_worker(bucket, token_file, 0, "wb");
    QVERIFY2(!a.url.empty() && !b.url.empty(), "grpo worker did not print its URL");
    // Stand-ins for broken workers (they live in this thread; run_engine serves their sockets).
    grpo::testing::StubWorker junk, shapes, alien, impostor;
    for (auto* s : {&junk, &shapes, &alien, &impostor}) {
      s->token = token;
      s->base_model = worker_base_model();
    }
    junk.garbage = "{\"id\": \"cmpl-1\", \"choices\": [{\"token_ids\": [1, 2";
    nlohmann::json choice = {{"index", 0}, {"token_ids", {1, 2, 3}}, {"finish_reason", "length"}};
    choice["logprobs"] = {{"token_logprobs", nlohmann::json::array({-0.5})}};  // 1 logprob for 3 tokens
    shapes.garbage = nlohmann::json{{"model", worker_base_model()}, {"choices", nlohmann::json::array({choice})}}.dump();
    choice["token_ids"] = {int64_t(1) << 40};  // well formed, but no such token
    choice["logprobs"]["token_logprobs"] = {-0.5};
    alien.garbage = nlohmann::json{{"model", worker_base_model()}, {"choices", nlohmann::json::array({choice})}}.dump();
    impostor.report_sha = std::string(64, 'b');  // answers policy-vN with other weights
    QVERIFY(junk.start() && shapes.start() && alien.start() && impostor.start());

    const auto cfg =
        worker_config(run_dir, {a.url, b.url, junk.url(), shapes.url(), alien.url(), impostor.url()}, token_file, 8);
    const std::string failure = run_with_workers(cfg, run_dir);
    QVERIFY2(failure.empty(), failure.c_str());
    for (auto* w : {&a, &b}) w->kill();
    QCOMPARE(read_jsonl(run_dir + "/metrics.jsonl").size(), size_t(cfg.max_steps));
    const auto quarantined = events_named(run_dir, "worker_quarantined");
    QCOMPARE(count_for(quarantined, a.url) + count_for(quarantined, b.url), 0);
    QVERIFY2(junk.completions > 0 && shapes.completions > 0 && alien.completions > 0, "the broken workers were never asked");
    for (const auto* s : {&junk, &shapes, &alien}) {
      // Quarantined at its first answer (again only if the run outlasts the 30 s quarantine).
      QVERIFY(count_for(quarantined, s->url()) >= 1);
      QVERIFY2(first_problem(quarantined, s->url()).empty(), first_problem(quarantined, s->url()).c_str());
    }
    for (const auto& e : quarantined) {
      const std::string url = e.value("url", ""), message = e.value("message", "");
      if (url == shapes.url())
        QVERIFY2(message.find("token_logprobs has 1 entries, token_ids has 3") != std::string::npos, e.dump().c_str());
      if (url == alien.url()) QVERIFY2(message.find("outside the vocabulary") != std::string::npos, e.dump().c_str());
    }
    // The impostor answers the base model honestly; once a version is live it names other weights.
    if (count_for(quarantined, impostor.url()) > 0) {
      bool named = false;
      for (const auto& e : quarantined)
        named |= e.value("url", "") == impostor.url() && e.value("message", "").find("bbbbbbbbbbbb") != std::string::npos;
      QVERIFY2(named, "the wrong weights are not named");
    } else {
      qInfo("the impostor was not asked for an adapter version during this run");
    }
    nlohmann::json acc;
    const std::string problems = accounting_problems(run_dir, cfg, &acc);
    QVERIFY2(problems.empty(), problems.c_str());
    QVERIFY(acc["router"]["redispatched"].get<int64_t>() >= 3);  // at least the three garbage answers
  }

  void slowWorkersChangeNothing() {
    Scratch sc;
    const std::string &bucket = sc.bucket, &run_dir = sc.run_dir, &token_file = sc.token_file;
    const double timeout_s = 2;
    WorkerProcess a = start_worker(bucket, token_file, 0, "wa");
    WorkerProcess slow = start_worker(bucket, token_file, 0, "slow", {"--inject-delay-ms", "300"});
    WorkerProcess late = start_worker(bucket, token_file, 0, "late", {"--inject-delay-ms", "2500"});  // > timeout
    QVERIFY2(!a.url.empty() && !slow.url.empty() && !late.url.empty(), "grpo worker did not print its URL");
    auto cfg = worker_config(run_dir, {a.url, slow.url, late.url}, token_file, 6);
    cfg.worker_timeout_s = timeout_s;
    // Rollouts stream, so the fast workers alone could finish the run before the late one's first
    // request times out: from step 2 the run is paused (requests out keep going) until the late
    // worker has been taken out, for at most 30 s.
    grpo::run::EngineOptions eo;
    eo.local_generators = 0;
    std::atomic<bool> late_out{false};
    eo.on_event = [&](const nlohmann::json& e) {
      if (e.value("event", "") == "worker_left" && e.value("url", "") == late.url) late_out = true;
    };
    std::string failure;
    {
      grpo::run::Engine engine(cfg, run_dir, eo);
      bool paused = false, resumed = false;
      std::chrono::steady_clock::time_point paused_at;
      failure = run_engine(engine, [&] {
        if (!paused && engine.step() >= 2) {
          engine.pause();
          paused = true;
          paused_at = std::chrono::steady_clock::now();
        }
        if (paused && !resumed && (late_out.load() || std::chrono::steady_clock::now() - paused_at > std::chrono::seconds(30))) {
          engine.resume();
          resumed = true;
        }
      });
      if (failure.empty() && engine.step() != cfg.max_steps) failure = "the run ended at step " + std::to_string(engine.step());
    }
    QVERIFY2(failure.empty(), failure.c_str());
    for (auto* w : {&a, &slow, &late}) w->kill();
    QCOMPARE(read_jsonl(run_dir + "/metrics.jsonl").size(), size_t(cfg.max_steps));
    // The late one is taken out for timing out (and comes back, and times out again).
    const auto left = events_named(run_dir, "worker_left");
    QVERIFY(count_for(left, late.url) >= 1);
    QVERIFY2(first_problem(left, late.url).empty(), first_problem(left, late.url).c_str());
    bool timed_out = false;
    for (const auto& e : left) timed_out |= e.value("url", "") == late.url && e.value("reason", "").find("timed out") != std::string::npos;
    QVERIFY2(timed_out, "the late worker was not taken out for timing out");
    QVERIFY(events_named(run_dir, "worker_quarantined").empty());  // slow is not broken
    nlohmann::json acc;
    const std::string problems = accounting_problems(run_dir, cfg, &acc);
    QVERIFY2(problems.empty(), problems.c_str());
    QVERIFY(acc["router"]["redispatched"].get<int64_t>() >= 1);
    QCOMPARE(acc["router"]["abandoned"].get<int64_t>(), int64_t(0));
  }
};

QTEST_GUILESS_MAIN(TestEngineWorkerFaults)
#include "test_engine_worker_faults.moc"
