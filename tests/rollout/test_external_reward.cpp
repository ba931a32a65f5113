// Tests for the `external` reward: small python3 programs written at test time that succeed,
// return null, hang, crash, print garbage, flood stdout or stderr, or stop reading; every test is
// bounded in time. Also the reply framing and parsing on their own (reward_protocol.h).
#include "tests/common/test_paths.h"
#include <QtTest>

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <fstream>

#include "core/rollout/external_reward.h"
#include "core/rollout/reward.h"
#include "core/rollout/reward_protocol.h"

using namespace grpo::rollout;

namespace {

RewardInput sample(std::string completion, std::optional<std::string> answer = std::string("x"),
                   nlohmann::json metadata = nlohmann::json::object()) {
  RewardInput in;
  in.prompt = "What?";
  in.completion = std::move(completion);
  in.answer = std::move(answer);
  in.metadata = std::move(metadata);
  return in;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool process_gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }  // reaped, no zombie

std::vector<std::optional<double>> opt(std::initializer_list<double> v) {
  std::vector<std::optional<double>> out;
  for (double x : v) out.push_back(std::isnan(x) ? std::nullopt : std::optional<double>(x));
  return out;
}
const double None = std::nan("");

// Collects the fault events an ExternalReward reports.
struct Events {
  std::vector<nlohmann::json> all;
  RewardEventSink sink() {
    return [this](const nlohmann::json& e) { all.push_back(e); };
  }
  std::vector<std::string> kinds() const {
    std::vector<std::string> out;
    for (const auto& e : all) out.push_back(e.value("event", ""));
    return out;
  }
};

}  // namespace

class TestExternalReward : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;

  // Writes `code` to <tmp>/<name> and returns options running it with python3.
  ExternalRewardOptions script(const char* name, const char* code, double timeout_s = 5.0) {
    std::string path = (dir_.path() + "/" + name).toStdString();
    std::ofstream(path) << "import sys, json, os, time\n" << code;
    ExternalRewardOptions o;
    o.command = "python3 '" + path + "'";
    o.timeout_s = timeout_s;
    o.startup_timeout_s = 5.0;
    o.shutdown_grace_s = 1.0;
    return o;
  }

private Q_SLOTS:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void requestLineCarriesMetadataAndNullAnswer() {
    auto j = nlohmann::json::parse(ExternalReward::request_line(sample("c", std::nullopt, {{"level", 3}, {"prompt", "shadowed"}})));
    QCOMPARE(j["prompt"], nlohmann::json("What?"));  // the fixed keys win over metadata
    QCOMPARE(j["completion"], nlohmann::json("c"));
    QVERIFY(j["answer"].is_null());
    QCOMPARE(j["level"], nlohmann::json(3));
    // Invalid UTF-8 (a completion cut mid-character) is replaced, not thrown.
    QVERIFY(!ExternalReward::request_line(sample("ab\xC3")).empty());
  }

  // The batch protocol: one line per batch each way; the shipped example program speaks it.
  void batchProtocolScoresAGroupInOneExchange() {
    auto line = nlohmann::json::parse(ExternalReward::batch_request_line({sample("a"), sample("b", std::nullopt)}));
    QCOMPARE(line["batch"].size(), size_t(2));
    QVERIFY(line["batch"][1]["answer"].is_null());

    auto o = script("batch.py", R"(
for line in sys.stdin:
    b = json.loads(line)["batch"]
    n = len(b)
    print(json.dumps({"rewards": [None if s["answer"] is None else n + i for i, s in enumerate(b)]}), flush=True)
)");
    o.batch = true;
    ExternalReward r(o);
    QCOMPARE(r.score({sample("a"), sample("b", std::nullopt), sample("c")}), opt({3.0, None, 5.0}));
    QCOMPARE(r.score({sample("a")}), opt({1.0}));
    QCOMPARE(r.starts(), 1);
    QCOMPARE(r.failures(), 0);

    // A reply with the wrong count is garbage: the whole batch is None and the program restarts.
    auto w = script("short.py", R"(
for line in sys.stdin:
    print(json.dumps({"rewards": [1.0]}), flush=True)
)");
    w.batch = true;
    ExternalReward bad(w);
    std::vector<nlohmann::json> events;
    bad.set_event_sink([&](const nlohmann::json& e) { events.push_back(e); });
    QCOMPARE(bad.score({sample("a"), sample("b")}), opt({None, None}));
    QCOMPARE(bad.failures(), 2);
    QVERIFY(!events.empty() && events[0]["event"] == "reward_bad_reply");
    QVERIFY2(events[0]["message"].get<std::string>().find("1 rewards for a batch of 2") != std::string::npos,
             events[0].dump().c_str());
    QCOMPARE(bad.score({sample("a")}), opt({1.0}));  // restarted, and a batch of one fits

    // resources/rewards/batch_reward_example.py, as a user copies it, through make_reward.
    auto fn = make_reward({{"name", "external"}, {"protocol", "batch"}, {"alias", "boxed_answer"},
                           {"command", "exec python3 '" + std::string(GRPO_RESOURCES) + "/rewards/batch_reward_example.py'"}});
    QCOMPARE(fn->name(), std::string("boxed_answer"));
    QCOMPARE(fn->score({sample("so \\boxed{1,234}", std::string("Step 1 ... #### 1234")), sample("\\boxed{7}", std::string("8")),
                        sample("no box", std::string("3")), sample("\\boxed{3}", std::nullopt)}),
             opt({1.0, 0.0, 0.0, None}));
  }

  void successScoresEveryRowWithOneProgram() {
    ExternalReward r(script("ok.py", R"(
for line in sys.stdin:
    req = json.loads(line)
    ok = req["completion"].strip() == req["answer"]
    print(json.dumps({"reward": (1.0 if ok else 0.0) + req.get("bonus", 0)}))
)"));
    std::vector<RewardInput> batch = {sample("x"), sample("y"), sample(" x ", std::string("x"), {{"bonus", 0.5}})};
    QCOMPARE(r.score(batch), opt({1.0, 0.0, 1.5}));
    QCOMPARE(r.score(batch), opt({1.0, 0.0, 1.5}));  // the same program again
    QCOMPARE(r.starts(), 1);
    QCOMPARE(r.failures(), 0);
  }

  void nullRewardIsNoneWithoutRestart() {
    ExternalReward r(script("null.py", R"(
for line in sys.stdin:
    req = json.loads(line)
    print(json.dumps({"reward": None if req["answer"] is None else 2}))
)"));
    QCOMPARE(r.score({sample("a", std::nullopt), sample("b"), sample("c", std::nullopt)}), opt({None, 2.0, None}));
    QCOMPARE(r.starts(), 1);
    QCOMPARE(r.failures(), 0);
  }

  void timeoutMarksTheSampleAndRestarts() {
    ExternalReward r(script("slow.py", R"(
for line in sys.stdin:
    if json.loads(line)["completion"] == "slow":
        time.sleep(60)
    print(json.dumps({"reward": 1}))
)", /*timeout_s=*/0.5));
    auto t0 = std::chrono::steady_clock::now();
    QCOMPARE(r.score({sample("fast"), sample("slow"), sample("fast"), sample("slow"), sample("fast")}),
             opt({1.0, None, 1.0, None, 1.0}));
    double took = seconds_since(t0);
    QVERIFY2(took < 8, qPrintable(QString::number(took)));
    QCOMPARE(r.starts(), 3);
    QCOMPARE(r.failures(), 2);
  }

  void crashRestartsAndLaterSamplesAreScored() {
    // Answers two samples, then dies on the third without replying.
    ExternalReward r(script("crash.py", R"(
n = 0
for line in sys.stdin:
    n += 1
    if n == 3:
        sys.stderr.write("Traceback: simulated crash\n")
        sys.exit(3)
    print(json.dumps({"reward": n}))
)"));
    QCOMPARE(r.score({sample("a"), sample("b"), sample("c"), sample("d"), sample("e"), sample("f"), sample("g")}),
             opt({1.0, 2.0, None, 1.0, 2.0, None, 1.0}));
    QCOMPARE(r.starts(), 3);
    QCOMPARE(r.failures(), 2);
  }

  void programThatExitsBetweenSamplesIsRestartedQuietly() {
    ExternalReward r(script("one.py", R"(
print(json.dumps({"reward": 7}) if sys.stdin.readline() else "")
)"));
    auto scores = r.score({sample("a"), sample("b"), sample("c")});
    QCOMPARE(scores[0], std::optional<double>(7.0));
    for (const auto& s : scores) QVERIFY(!s || *s == 7.0);  // a race may cost a sample, never a wrong value
    QVERIFY(r.starts() >= 2);
  }

  void garbageOutputIsNone() {
    ExternalReward r(script("garbage.py", R"(
for line in sys.stdin:
    c = json.loads(line)["completion"]
    out = {"notjson": "hello there", "nokey": '{"score": 1}', "string": '{"reward": "high"}',
           "bool": '{"reward": true}', "array": '[1]', "nan": '{"reward": NaN}'}.get(c, '{"reward": 0.5}')
    print(out)
)"));
    std::vector<RewardInput> batch;
    for (const char* c : {"ok", "notjson", "ok", "nokey", "ok", "string", "bool", "ok", "array", "nan", "ok"})
      batch.push_back(sample(c));
    QCOMPARE(r.score(batch), opt({0.5, None, 0.5, None, 0.5, None, None, 0.5, None, None, 0.5}));
    QCOMPARE(r.failures(), 6);
    QCOMPARE(r.starts(), 7);
  }

  void writeToAProgramThatStoppedReadingDoesNotKillUs() {
    // Closes its stdin before the first reply: our next write gets EPIPE (and SIGPIPE, which
    // must be swallowed, or this test process dies).
    ExternalRewardOptions o = script("closer.py", R"(
sys.stdin.readline()
os.close(0)
print(json.dumps({"reward": 1}))
time.sleep(60)
)", /*timeout_s=*/2.0);
    o.command = "exec " + o.command;  // no shell in between still holding the pipe open
    ExternalReward r(o);
    auto t0 = std::chrono::steady_clock::now();
    QCOMPARE(r.score({sample("a"), sample("b"), sample("c")}), opt({1.0, None, 1.0}));
    // The program sleeps 60 s on "b": back well before that, the 2 s timeout cut it short. The
    // bound is far from both, so no load makes it pass or fail by itself.
    QVERIFY(seconds_since(t0) < 45);
    QCOMPARE(r.starts(), 2);
  }

  void brokenCommandGivesUpAfterConsecutiveFailures() {
    ExternalRewardOptions o;
    o.command = "exec /nonexistent/reward-program";
    o.timeout_s = 2;
    o.max_consecutive_failures = 3;
    ExternalReward r(o);
    auto t0 = std::chrono::steady_clock::now();
    auto scores = r.score(std::vector<RewardInput>(10, sample("a")));
    QCOMPARE(scores, std::vector<std::optional<double>>(10));
    QCOMPARE(r.starts(), 3);
    QVERIFY(seconds_since(t0) < 45);  // gave up; no 2 s timeout per sample (10 samples) on top
    r.score({sample("a")});  // a new batch tries again
    QCOMPARE(r.starts(), 4);
  }

  void restartsLeakNoFileDescriptors() {
    auto open_fds = [] { return QDir("/proc/self/fd").entryList(QDir::NoDotAndDotDot | QDir::System).size(); };
    const auto before = open_fds();
    {
      ExternalRewardOptions o;
      o.command = "read line; echo garbage";  // one garbage reply, then exit: a restart per sample
      o.timeout_s = 2;
      o.max_consecutive_failures = 100;
      ExternalReward r(o);
      QCOMPARE(r.score(std::vector<RewardInput>(8, sample("a"))), std::vector<std::optional<double>>(8));
      QCOMPARE(r.starts(), 8);
    }
    QCOMPARE(open_fds(), before);
  }

  void destructionReapsAWellBehavedProgramQuickly() {
    pid_t pid = -1;
    auto t0 = std::chrono::steady_clock::now();
    {
      // A grace of 60 s: a destructor that waited for it instead of seeing the program leave on
      // EOF would take that long, far past the bound below whatever the machine's load.
      ExternalRewardOptions o = script("echo.py", "for line in sys.stdin:\n    print('{\"reward\": 1}')\n");
      o.shutdown_grace_s = 60;
      ExternalReward r(o);
      r.score({sample("a")});
      pid = r.pid();
      QVERIFY(pid > 0);
    }
    QVERIFY(seconds_since(t0) < 45);
    QVERIFY(process_gone(pid));
  }

  void destructionKillsAProgramThatIgnoresEof() {
    pid_t pid = -1;
    ExternalRewardOptions o = script("stubborn.py", R"(
import signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for line in sys.stdin:
    print(json.dumps({"reward": 1}))
time.sleep(60)
)");
    o.shutdown_grace_s = 0.3;
    auto r = std::make_unique<ExternalReward>(o);
    QCOMPARE(r->score({sample("a")}), opt({1.0}));
    pid = r->pid();
    auto t0 = std::chrono::steady_clock::now();
    r.reset();
    double took = seconds_since(t0);
    QVERIFY2(took >= 0.25 && took < 3, qPrintable(QString::number(took)));
    QVERIFY(process_gone(pid));
  }

  // ---- faults reported as events (issue 8): hang, flood, stderr ----

  void hangingProgramIsReportedRestartedAndCleared() {
    ExternalRewardOptions o = script("hang.py", R"(
for line in sys.stdin:
    if json.loads(line)["completion"] == "hang":
        time.sleep(3600)
    print(json.dumps({"reward": 1}))
)", /*timeout_s=*/0.5);
    o.startup_timeout_s = 1.0;
    ExternalReward r(o);
    Events ev;
    r.set_event_sink(ev.sink());
    QCOMPARE(r.score({sample("a"), sample("hang"), sample("hang"), sample("b")}), opt({1.0, None, None, 1.0}));
    QCOMPARE(r.starts(), 3);
    // One event per episode, however many samples it costs, then its _cleared.
    QCOMPARE(ev.kinds(), (std::vector<std::string>{"reward_timeout", "reward_timeout_cleared"}));
    const auto& e = ev.all[0];
    QCOMPARE(e["severity"], nlohmann::json("warning"));
    QVERIFY2(e["message"].get<std::string>().find("hang.py") != std::string::npos, e.dump().c_str());
    QVERIFY2(e["message"].get<std::string>().find("timed out") != std::string::npos, e.dump().c_str());
    QVERIFY2(e["advice"].get<std::string>().find("timeout_s") != std::string::npos, e.dump().c_str());
    QCOMPARE(e["reward"], nlohmann::json("external"));
    QCOMPARE(ev.all[1]["failures"], nlohmann::json(2));
  }

  void megabytesWithoutNewlineAreAFloodWithBoundedMemory() {
    ExternalReward r(script("flood.py", R"(
for line in sys.stdin:
    if json.loads(line)["completion"] == "flood":
        sys.stdout.write("x" * (8 << 20))
        sys.stdout.flush()
        time.sleep(3600)
    print(json.dumps({"reward": 1}))
)"));
    Events ev;
    r.set_event_sink(ev.sink());
    QCOMPARE(r.score({sample("a"), sample("flood"), sample("b")}), opt({1.0, None, 1.0}));
    QCOMPARE(r.starts(), 2);
    QCOMPARE(ev.kinds(), (std::vector<std::string>{"reward_output_flood", "reward_output_flood_cleared"}));
    QVERIFY2(ev.all[0]["message"].get<std::string>().find("1 MiB") != std::string::npos, ev.all[0].dump().c_str());
    QVERIFY(!ev.all[0]["advice"].get<std::string>().empty());
  }

  void endlessBlankLinesAreAFlood() {
    ExternalReward r(script("blank.py", R"(
for line in sys.stdin:
    if json.loads(line)["completion"] == "blank":
        while True:
            sys.stdout.write("\n" * 65536)
    print(json.dumps({"reward": 1}))
)"));
    Events ev;
    r.set_event_sink(ev.sink());
    QCOMPARE(r.score({sample("blank"), sample("b")}), opt({None, 1.0}));
    QCOMPARE(ev.kinds(), (std::vector<std::string>{"reward_output_flood", "reward_output_flood_cleared"}));
  }

  void manyLinesPerRequestNeverShiftRepliesOntoOtherSamples() {
    // Replies with the sample's own number; for some samples extra lines follow in the same
    // write: an extra line must never be taken as a later sample's reply.
    ExternalReward r(script("chatty.py", R"(
for line in sys.stdin:
    n = int(json.loads(line)["completion"])
    extra = "".join(json.dumps({"reward": 1000 * k + n}) + "\n" for k in range(1, 200)) if n % 3 == 1 else ""
    sys.stdout.write(json.dumps({"reward": n}) + "\n" + extra)
    sys.stdout.flush()
)"));
    Events ev;
    r.set_event_sink(ev.sink());
    std::vector<RewardInput> batch;
    for (int i = 0; i < 12; ++i) batch.push_back(sample(std::to_string(i)));
    QCOMPARE(r.score(batch), opt({0, None, 2, 3, None, 5, 6, None, 8, 9, None, 11}));
    QCOMPARE(r.starts(), 5);
    QCOMPARE(ev.kinds().front(), std::string("reward_output_flood"));
    QVERIFY2(ev.all[0]["message"].get<std::string>().find("more than one line") != std::string::npos,
             ev.all[0].dump().c_str());
  }

  void outputBetweenRequestsIsCaughtBeforeTheNextSample() {
    // A line printed after the reply, while no sample is pending, would be read as the next
    // sample's reply: it is caught before the next sample is sent.
    ExternalReward r(script("late.py", R"(
for line in sys.stdin:
    print(json.dumps({"reward": 1}), flush=True)
    time.sleep(0.1)
    print(json.dumps({"reward": 99}), flush=True)
)"));
    Events ev;
    r.set_event_sink(ev.sink());
    QCOMPARE(r.score({sample("a")}), opt({1.0}));
    QTest::qWait(600);  // the late line arrives meanwhile (ordering only; nothing timed is asserted)
    QCOMPARE(r.score({sample("b"), sample("c")}), opt({None, 1.0}));
    QCOMPARE(ev.kinds(), (std::vector<std::string>{"reward_output_flood", "reward_output_flood_cleared"}));
    QVERIFY2(ev.all[0]["message"].get<std::string>().find("no sample asked for") != std::string::npos,
             ev.all[0].dump().c_str());
  }

  void heavyStderrNeverBlocks() {
    // One thread writes stderr without pause (it blocks on the pipe unless we drain it, and a
    // drain that reads until empty would never return); another replies.
    ExternalReward r(script("noisy.py", R"(
import threading
def noise():
    chunk = "log line that nobody reads\n" * 4096
    while True:
        sys.stderr.write(chunk)
threading.Thread(target=noise, daemon=True).start()
for line in sys.stdin:
    sys.stderr.write("x" * (4 << 20))
    print(json.dumps({"reward": len(json.loads(line)["completion"])}))
)", /*timeout_s=*/20.0));
    std::vector<RewardInput> batch;
    for (int i = 0; i < 10; ++i) batch.push_back(sample(std::string(static_cast<size_t>(i), 'a')));
    auto scores = r.score(batch);
    for (int i = 0; i < 10; ++i) QCOMPARE(scores[i], std::optional<double>(i));
    QCOMPARE(r.starts(), 1);
    QCOMPARE(r.failures(), 0);
  }

  void crashAndBadReplyAreReportedAsTheirKinds() {
    ExternalReward r(script("mixed.py", R"(
for line in sys.stdin:
    c = json.loads(line)["completion"]
    if c == "crash":
        sys.exit(2)
    print("not json" if c == "bad" else json.dumps({"reward": 1}))
)"));
    Events ev;
    r.set_event_sink(ev.sink());
    QCOMPARE(r.score({sample("crash"), sample("bad"), sample("ok")}), opt({None, None, 1.0}));
    QCOMPARE(ev.kinds(), (std::vector<std::string>{"reward_crashed", "reward_crashed_cleared", "reward_bad_reply",
                                                   "reward_bad_reply_cleared"}));
    for (const auto& e : ev.all)
      if (e.contains("severity")) QVERIFY2(!e.value("advice", "").empty(), e.dump().c_str());
  }

  // ---- reply framing and parsing alone ----

  void framerKeepsAtMostOneMebibyte() {
    ReplyFramer f;
    const std::string chunk(64 * 1024, 'x');
    int accepted = 0;
    for (int i = 0; i < 100 && f.append(chunk); ++i) ++accepted;  // 6.4 MiB offered
    QCOMPARE(accepted, int(kMaxReplyBytes / chunk.size()));
    QVERIFY(f.buffered() <= kMaxReplyLine);
    QVERIFY(!f.flood().empty());
    QVERIFY(!f.next_line());

    ReplyFramer g;  // lines split across reads, CRLF, blank lines skipped
    QVERIFY(g.append("\n \r\n{\"rew"));
    QVERIFY(!g.next_line());
    QVERIFY(g.has_pending_output());
    QVERIFY(g.append("ard\": 2}\r\n\n"));
    QCOMPARE(g.next_line(), std::optional<std::string>("{\"reward\": 2}"));
    QVERIFY(!g.has_pending_output());
    QVERIFY(!g.next_line());
  }

  void parseReplyAcceptsOnlyANumberOrNull() {
    QCOMPARE(parse_reward_reply(R"({"reward": -2.5, "why": "x"})").value, -2.5);
    QVERIFY(parse_reward_reply(R"({"reward": -2.5})").kind == RewardReply::Kind::Reward);
    QVERIFY(parse_reward_reply(R"({"reward": null})").kind == RewardReply::Kind::Null);
    for (const char* bad : {"", "1", "[1]", "{}", R"({"reward": "1"})", R"({"reward": true})", R"({"reward": 1e999})",
                            R"({"reward": NaN})", "{\"reward\": \"\xff\"}", R"({"reward": 1)"}) {
      const auto r = parse_reward_reply(bad);
      QVERIFY2(r.kind == RewardReply::Kind::Garbage, bad);
      QVERIFY2(r.error.find("garbage output") == 0, bad);
    }
    // A reply nested past the limit is garbage before any DOM is built (issue 18), either protocol.
    const std::string deep = "{\"reward\": 1, \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
    QVERIFY(parse_reward_reply(deep).kind == RewardReply::Kind::Garbage);
    QVERIFY(!parse_reward_batch_reply("{\"rewards\": [1], \"x\": " + std::string(100000, '[') + "}", 1).ok);
  }
};

QTEST_GUILESS_MAIN(TestExternalReward)
#include "test_external_reward.moc"
