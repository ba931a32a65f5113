// Router and WorkerClient against StubWorker responders on 127.0.0.1: the example response of
// docs/workers.md, "Completion response", parses unchanged; adapter loads are all-or-nothing (one
// failing worker -> unloaded on the others) and retried while "No adapter found"; a worker that
// dies, hangs or reports the wrong adapter hash is taken out and its requests are dispatched again;
// a restarted worker is probed, loaded with the live adapters and used again; the accounting
// identities hold.
#include <QtTest>

#include <chrono>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/cluster/router.h"
#include "core/cluster/worker_client.h"
#include "core/common/error.h"
#include "tests/cluster/stub_worker.h"
#include "tests/common/error_of.h"

using namespace grpo::cluster;
using grpo::testing::StubWorker;
using grpo::testing::error_of;

namespace {

// docs/workers.md, "Completion response" (the example there is this constant, byte for byte
// apart from JSON spacing).
const char* kFactsExample = R"({"id":"cmpl-x","object":"text_completion","created":1757,"model":"trl-policy-v7",
 "choices":[{"index":0,"text":"..",
   "logprobs":{"text_offset":[0,3],"token_logprobs":[-0.12,-1.7],
               "tokens":["token_id:785","token_id:13"],"top_logprobs":[{"token_id:785":-0.12},{"token_id:13":-1.7}]},
   "finish_reason":"stop","stop_reason":null,
   "token_ids":[785,13],"prompt_token_ids":[151644,872,198],"prompt_logprobs":null}],
 "usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":null},
 "system_fingerprint":null,"kv_transfer_params":null})";

RouterOptions options(double timeout_s = 10) {
  RouterOptions o;
  o.token = "stub-token";
  o.request_timeout_s = timeout_s;
  o.health_timeout_s = 2;
  o.load_timeout_s = 10;
  o.load_retry_s = 0.05;
  o.probe_min_s = 0.05;
  o.probe_max_s = 0.2;
  return o;
}

std::vector<CompletionRequest> requests(const std::string& model, int prompts, int g, int salt = 0) {
  std::vector<CompletionRequest> out;
  for (int p = 0; p < prompts; ++p)
    for (int i = 0; i < g; ++i) {
      CompletionRequest r;
      r.model = model;
      for (int t = 0; t < 40; ++t) r.prompt.push_back(1000 * (p + 1 + salt) + t);
      r.max_tokens = 2;
      r.seed = static_cast<uint64_t>(p * 100 + i);
      out.push_back(r);
    }
  return out;
}

void check_identities(const RouterAccounting& a) {
  QCOMPARE(a.dispatched, a.completed + a.redispatched + a.rejected + a.cancelled);
  QCOMPARE(a.requests, a.completed + a.abandoned + a.withdrawn);
}

int count_events(const std::vector<nlohmann::json>& ev, const std::string& name, const std::string& url) {
  int n = 0;
  for (const auto& e : ev) n += (e.value("event", "") == name && e.value("url", "") == url) ? 1 : 0;
  return n;
}

// A live stub worker (index 1) and a hung one (index 2) behind a router with a 1 s timeout,
// both up.
struct LiveAndHung {
  StubWorker a, b;
  std::vector<nlohmann::json> events;
  std::unique_ptr<Router> router;  // declared last: destroyed before the workers it talks to
  bool start() {
    a.index = 1;
    b.index = 2;
    b.hang_completions = true;
    if (!a.start() || !b.start()) return false;
    router = std::make_unique<Router>(options(/*timeout_s=*/1.0), [this](const nlohmann::json& e) { events.push_back(e); });
    router->add_worker(a.url());
    router->add_worker(b.url());
    return router->wait_for_workers(2, 10) == 2;
  }
};

}  // namespace

class TestRouter : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void parsesTheFactsExampleUnchanged() {
    const auto r = parse_completion_response(kFactsExample, "http://w1");
    QCOMPARE(r.model, std::string("trl-policy-v7"));
    QCOMPARE(r.choices.size(), size_t(1));
    QCOMPARE(r.choices[0].token_ids, (std::vector<int64_t>{785, 13}));
    QCOMPARE(r.choices[0].logprobs, (std::vector<double>{-0.12, -1.7}));
    QCOMPARE(r.choices[0].finish_reason, std::string("stop"));
    QCOMPARE(r.completion_tokens, int64_t(2));
  }

  void parseErrorsNameTheWorkerAndTheField() {
    auto j = nlohmann::json::parse(kFactsExample);
    j["choices"][0].erase("token_ids");
    CHECK_ERROR_CONTAINS(error_of([&] { parse_completion_response(j.dump(), "http://w9:8000"); }), "http://w9:8000",
                         "choices[0].token_ids", "return_token_ids");
    j = nlohmann::json::parse(kFactsExample);
    j["choices"][0]["logprobs"]["token_logprobs"] = {-0.1};
    CHECK_ERROR_CONTAINS(error_of([&] { parse_completion_response(j.dump(), "http://w9"); }), "token_logprobs", "1",
                         "2");
    CHECK_ERROR_CONTAINS(error_of([&] { parse_completion_response("<html>", "http://w9"); }), "not a JSON object");
  }

  // The body TRL's rollout worker sends (docs/workers.md, "Completion request").
  void requestBodyHasTrlFields() {
    CompletionRequest r;
    r.model = "policy-v3";
    r.prompt = {1, 2, 3};
    r.max_tokens = 64;
    r.temperature = 0.7;
    r.seed = 5;
    const auto j = completion_request_json(r);
    QCOMPARE(j["model"].get<std::string>(), std::string("policy-v3"));
    QCOMPARE(j["prompt"].get<std::vector<int64_t>>(), (std::vector<int64_t>{1, 2, 3}));
    QCOMPARE(j["n"].get<int>(), 1);
    QCOMPARE(j["logprobs"].get<int>(), 0);
    QCOMPARE(j["return_token_ids"].get<bool>(), true);
    QCOMPARE(j["max_tokens"].get<int>(), 64);
    QCOMPARE(j["seed"].get<int>(), 5);
    QVERIFY(!j.contains("top_k"));
  }

  void wrongTokenIsNotUp() {
    StubWorker w;
    QVERIFY(w.start());
    auto o = options();
    o.token = "wrong";
    Router router(o);
    router.add_worker(w.url());
    QCOMPARE(router.wait_for_workers(1, 1.0), 0);
    QVERIFY(w.unauthorized > 0);
  }

  void loadIsAllOrNothing() {
    StubWorker a, b, c;
    c.load_fails = true;
    for (auto* w : {&a, &b, &c}) QVERIFY(w->start());
    std::vector<nlohmann::json> events;
    Router router(options(), [&](const nlohmann::json& e) { events.push_back(e); });
    for (auto* w : {&a, &b, &c}) router.add_worker(w->url());
    QCOMPARE(router.wait_for_workers(3, 10), 3);
    const std::string err = error_of([&] { router.load_adapter("policy-v1", "/bucket/run/adapters/policy-v1", ""); });
    CHECK_ERROR_CONTAINS(err, c.url(), "1/3", "policy-v1", "rolled back");
    // Accepted by a and b, then unloaded from both; never left loaded anywhere.
    for (auto* w : {&a, &b}) {
      QCOMPARE(w->load_attempts, std::vector<std::string>{"policy-v1"});
      QCOMPARE(w->unloads, std::vector<std::string>{"policy-v1"});
      QVERIFY(w->loaded.empty());
    }
    QVERIFY(c.loaded.empty());
    QVERIFY(router.live_adapters().empty());
    QCOMPARE(router.workers_up(), 3);  // a refusing worker is not a dead one
    // Once c accepts, the same name loads everywhere.
    c.load_fails = false;
    router.load_adapter("policy-v2", "/bucket/run/adapters/policy-v2", "");
    for (auto* w : {&a, &b, &c}) QCOMPARE(w->loaded.count("policy-v2"), size_t(1));
    QCOMPARE(router.live_adapters(), std::vector<std::string>{"policy-v2"});
  }

  void noAdapterFoundIsRetriedUntilTheMountCatchesUp() {
    StubWorker a, b;
    b.no_adapter_found = 3;
    QVERIFY(a.start() && b.start());
    Router router(options());
    router.add_worker(a.url());
    router.add_worker(b.url());
    QCOMPARE(router.wait_for_workers(2, 10), 2);
    router.load_adapter("policy-v1", "/bucket/p1", "");
    QCOMPARE(b.load_attempts.size(), size_t(4));
    QCOMPARE(b.loaded.at("policy-v1"), std::string("/bucket/p1"));
    // A mount that never catches up fails the load (and rolls back on a).
    b.no_adapter_found = 1000000;
    auto o = options();
    o.load_timeout_s = 0.3;
    Router slow(o);
    slow.add_worker(a.url());
    slow.add_worker(b.url());
    QCOMPARE(slow.wait_for_workers(2, 10), 2);
    CHECK_ERROR_CONTAINS(error_of([&] { slow.load_adapter("policy-v9", "/bucket/p9", ""); }), "No adapter found",
                         "--bucket");
    QCOMPARE(a.loaded.count("policy-v9"), size_t(0));
  }

  // A worker dies in the middle of a batch: its requests go to the other one, nothing is lost or
  // answered twice; restarted on its port it is probed, loaded with the live adapter and used.
  void deadWorkerIsReplacedAndRejoins() {
    StubWorker a, b;
    a.index = 1;
    b.index = 2;
    b.die_after = 3;
    QVERIFY(a.start() && b.start());
    std::vector<nlohmann::json> events;
    Router router(options(), [&](const nlohmann::json& e) { events.push_back(e); });
    router.add_worker(a.url());
    router.add_worker(b.url());
    QCOMPARE(router.wait_for_workers(2, 10), 2);
    router.load_adapter("policy-v1", "/bucket/p1", "");
    const auto reqs = requests("policy-v1", 6, 8);
    const auto out = router.complete(reqs, 60);
    QCOMPARE(out.size(), reqs.size());
    int from_a = 0, from_b = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      QVERIFY2(out[i].ok, out[i].error.c_str());
      // Each answer is for its own request (the stub echoes the prompt length).
      QCOMPARE(out[i].response.choices.at(0).token_ids.at(1), int64_t(reqs[i].prompt.size()));
      (out[i].response.choices[0].token_ids[0] == 1 ? from_a : from_b)++;
    }
    QVERIFY(from_b <= 3);  // at most what it answered before it died
    QCOMPARE(b.completions, 3);
    QCOMPARE(from_a + from_b, 48);
    QCOMPARE(a.completions, 48 - from_b);  // every request answered once by a, unless b's answer arrived
    auto acc = router.accounting();
    check_identities(acc);
    QCOMPARE(acc.completed, int64_t(48));
    QCOMPARE(acc.abandoned, int64_t(0));
    QVERIFY(acc.redispatched >= 1);
    QCOMPARE(count_events(events, "worker_left", b.url()), 1);
    QCOMPARE(router.workers_up(), 1);

    // Back on the same port, empty: probed, given policy-v1, and used again.
    b.die_after = -1;
    QVERIFY(b.restart());
    QCOMPARE(router.wait_for_workers(2, 10), 2);
    QCOMPARE(b.loaded.at("policy-v1"), std::string("/bucket/p1"));
    QCOMPARE(count_events(events, "worker_joined", b.url()), 2);
    const int before = b.completions;
    const auto out2 = router.complete(requests("policy-v1", 6, 8, /*salt=*/50), 60);
    for (const auto& o : out2) QVERIFY2(o.ok, o.error.c_str());
    QVERIFY(b.completions > before);
    acc = router.accounting();
    check_identities(acc);
    QCOMPARE(acc.completed, int64_t(96));
  }

  void hungWorkerTimesOut() {
    LiveAndHung w;
    QVERIFY(w.start());
    StubWorker& b = w.b;
    Router& router = *w.router;
    const auto& events = w.events;
    const auto out = router.complete(requests(router.base_model(), 4, 4), 60);
    for (const auto& o : out) {
      QVERIFY2(o.ok, o.error.c_str());
      QCOMPARE(o.response.choices[0].token_ids[0], int64_t(1));
    }
    QCOMPARE(count_events(events, "worker_left", b.url()), 1);
    const auto acc = router.accounting();
    check_identities(acc);
    QVERIFY(acc.redispatched >= 1);
    QCOMPARE(acc.completed, int64_t(16));
  }

  // Streaming (submit/poll, the engine's remote producer): requests stay out between polls and
  // each comes back exactly once; a hung worker's requests go to the other one after its
  // timeout; cancel_stream withdraws what is still out, and the next poll returns it.
  void streamReturnsEachRequestOnceAndWithdrawsOnCancel() {
    LiveAndHung w;
    QVERIFY(w.start());
    StubWorker &a = w.a, &b = w.b;
    Router& router = *w.router;
    const auto& events = w.events;
    std::map<uint64_t, int> seen;
    for (const auto& r : requests(router.base_model(), 4, 4)) seen[router.submit(r, 60)] = 0;
    QCOMPARE(router.unfinished(), size_t(16));
    size_t got = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got < 16 && std::chrono::steady_clock::now() < until) {
      for (auto& [id, o] : router.poll(0.2)) {
        QVERIFY2(seen.count(id) == 1, "poll returned an id that was never submitted");
        QCOMPARE(++seen[id], 1);
        QVERIFY2(o.ok, o.error.c_str());
        QCOMPARE(o.response.choices[0].token_ids[0], int64_t(1));  // answered by a, the live one
        ++got;
      }
    }
    QCOMPARE(got, size_t(16));
    QCOMPARE(router.unfinished(), size_t(0));
    QVERIFY(count_events(events, "worker_left", b.url()) >= 1);
    auto acc = router.accounting();
    check_identities(acc);
    QCOMPARE(acc.completed, int64_t(16));
    QCOMPARE(acc.withdrawn, int64_t(0));

    a.hang_completions = true;  // nothing answers now: cancel what is out
    for (const auto& r : requests(router.base_model(), 1, 3, /*salt=*/7)) seen[router.submit(r, 60)] = 0;
    QVERIFY(router.poll(0.1).empty());
    router.cancel_stream("the run is stopping");
    const auto withdrawn = router.poll(0);
    QCOMPARE(withdrawn.size(), size_t(3));
    for (const auto& [id, o] : withdrawn) {
      QCOMPARE(++seen[id], 1);
      QVERIFY(!o.ok);
      QVERIFY2(o.error.find("stopping") != std::string::npos, o.error.c_str());
    }
    QCOMPARE(router.unfinished(), size_t(0));
    acc = router.accounting();
    check_identities(acc);
    QVERIFY2(acc.withdrawn == 3 && acc.abandoned == 0, acc.to_json().dump().c_str());
  }

  void wrongAdapterHashTakesTheWorkerOut() {
    StubWorker a, b;
    a.index = 1;
    b.index = 2;
    const std::string sha(64, 'a');
    a.report_sha = sha;
    b.report_sha = std::string(64, 'b');
    QVERIFY(a.start() && b.start());
    std::vector<nlohmann::json> events;
    Router router(options(), [&](const nlohmann::json& e) { events.push_back(e); });
    router.add_worker(a.url());
    router.add_worker(b.url());
    QCOMPARE(router.wait_for_workers(2, 10), 2);
    router.load_adapter("policy-v4", "/bucket/p4", sha);
    const auto out = router.complete(requests("policy-v4", 4, 4), 60);
    for (const auto& o : out) {
      QVERIFY2(o.ok, o.error.c_str());
      QCOMPARE(o.response.choices[0].token_ids[0], int64_t(1));
    }
    // Taken out (again after each rejoin: it reloads policy-v4 but still reports other weights).
    QVERIFY(count_events(events, "worker_left", b.url()) >= 1);
    bool named = false;
    for (const auto& e : events)
      named |= e.value("event", "") == "worker_left" && e.value("reason", "").find("bbbbbbbbbbbb") != std::string::npos;
    QVERIFY(named);
    check_identities(router.accounting());
  }

  void pauseAndResumeReachEveryWorker() {
    StubWorker a, b;
    QVERIFY(a.start() && b.start());
    Router router(options());
    router.add_worker(a.url());
    router.add_worker(b.url());
    QCOMPARE(router.wait_for_workers(2, 10), 2);
    QCOMPARE(router.pause_all(), 2);
    QCOMPARE(router.resume_all(), 2);
    for (auto* w : {&a, &b}) {
      QVERIFY(std::find(w->paths_seen.begin(), w->paths_seen.end(), "POST /pause?mode=keep") != w->paths_seen.end());
      QVERIFY(std::find(w->paths_seen.begin(), w->paths_seen.end(), "POST /resume") != w->paths_seen.end());
    }
  }

  // No worker at all: the batch is given up at its deadline, counted as abandoned.
  void noWorkerMeansAbandonedAtTheDeadline() {
    Router router(options());
    router.add_worker("http://127.0.0.1:1");  // nothing listens on port 1
    const auto out = router.complete(requests("m", 1, 2), 0.5);
    for (const auto& o : out) QVERIFY(!o.ok);
    const auto acc = router.accounting();
    check_identities(acc);
    QCOMPARE(acc.abandoned, int64_t(2));
  }
};

QTEST_GUILESS_MAIN(TestRouter)
#include "test_router.moc"
