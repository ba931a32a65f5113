// Fault tests (issue 8 §2): a bucket that fills up, and reward programs that hang.
//
// - appends and publications under a real file-size limit (RLIMIT_FSIZE on this process: writes
//   past it fail with EFBIG): a torn metrics line is cut off, a failed publication leaves no
//   version and no temporary directory, and both work again once the limit is lifted;
// - a real `grpo train` whose run directory is a small tmpfs of its own (a private mount
//   namespace: `unshare -m` as root, else `unshare -rm` with user namespaces; skipped when
//   neither works): the test fills the tmpfs until writes fail, sees the run pause with a
//   bucket_write_failed event, frees the space and sees the run resume and finish with every step,
//   adapter and checkpoint intact;
// - optimizer.pt under the same limit: a grpo::Error naming the file, nothing half-written left;
// - an EngineSession (the app's view of a run) reports bucket_write_failed while the bucket is
//   still full, before events.jsonl can hold it, and each event exactly once after;
// - the trainer's endpoint serves those held-back events on GET /grpo/events at the indices their
//   lines get once space is back;
// - an in-process run whose external reward never answers: every sample is unscorable (advantage
//   0, counted in sample/unscorable_frac), events.jsonl says reward_timeout with advice, and the
//   run finishes.
#include "tests/common/test_paths.h"
#include <QtTest>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "core/common/error.h"
#include "core/grpo/optimizer.h"
#include "core/records/run_dir.h"
#include "core/run/engine.h"
#include "core/run/engine_session.h"
#include "core/serve/run_endpoint.h"
#include "engine_test_util.h"
#include "tests/common/raw_http.h"

using namespace engine_test;

namespace {

// Lowers this process's file-size limit (soft) while alive; SIGXFSZ is ignored, so writes past the
// limit fail with EFBIG instead of killing us.
struct FileSizeLimit {
  rlimit old{};
  explicit FileSizeLimit(rlim_t bytes) {
    ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old);
    rlimit lim = old;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &old); }
};

// Every line of a JSONL file parses (a torn line fails the test); returns the records.
std::vector<nlohmann::json> read_jsonl_strict(const std::string& path) {
  std::vector<nlohmann::json> out;
  for (const auto& line : ::grpo::split(::grpo::read_file(path), '\n')) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) throw std::runtime_error(path + ": torn or invalid line: " + line.substr(0, 200));
    out.push_back(std::move(j));
  }
  return out;
}

// Lines that parse, for watching a live run (an append cut short is visible for an instant
// before it is cut off; the finished run's files are read strictly).
size_t count_lines(const std::string& path) {
  size_t n = 0;
  if (::grpo::file_exists(path))
    for (const auto& line : ::grpo::split(::grpo::read_file(path), '\n'))
      n += !line.empty() && !nlohmann::json::parse(line, nullptr, false).is_discarded();
  return n;
}

// An 8-step in-process run without checkpoints, for filling its bucket mid-run.
::grpo::grpo::TrainConfig short_run(const QTemporaryDir& tmp) {
  auto cfg = tiny_config(tmp.path().toStdString() + "/run");
  cfg.max_steps = 8;
  cfg.save_steps = 0;
  return cfg;
}

// Polls `ok` every 20 ms for at most `seconds`; its last answer.
bool wait_for(const std::function<bool()>& ok, int seconds) {
  QElapsedTimer t;
  t.start();
  while (!ok() && t.elapsed() < seconds * 1000LL) QThread::msleep(20);
  return ok();
}

bool command_succeeds(const QString& program, const QStringList& args) {
  QProcess p;
  p.start(program, args);
  return p.waitForFinished(20000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0;
}

// A process started in its own session (setsid) whose whole group is killed when the test leaves.
struct ProcessGroup {
  QProcess p;
  ~ProcessGroup() {
    if (p.state() != QProcess::NotRunning) {
      ::kill(-static_cast<pid_t>(p.processId()), SIGKILL);
      p.waitForFinished(10000);
    }
  }
};

void check_bucket_intact(const std::string& run_dir) {
  ::grpo::run::RunDirectory dir(run_dir);
  for (int64_t v : dir.adapter_versions()) {
    auto bad = ::grpo::run::verify_sha256sums(dir.adapter_dir(v));
    QVERIFY2(bad.empty(), qPrintable(QString("policy-v%1 is torn: %2").arg(v).arg(QString::fromStdString(::grpo::join(bad, ",")))));
  }
  for (const char* sub : {"adapters", "checkpoints"})
    for (const auto& e : QDir(QString::fromStdString(run_dir + "/" + sub)).entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
      QVERIFY2(!e.startsWith(".tmp"), qPrintable(QString("a temporary directory is visible: ") + e));
      if (QString(sub) == "checkpoints")
        QVERIFY2(::grpo::run::verify_sha256sums(run_dir + "/checkpoints/" + e.toStdString()).empty(), qPrintable(e));
    }
}

}  // namespace

class TestEngineBucketFull : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void appendUnderAFileSizeLimitCutsOffTheTornLine() {
    QTemporaryDir tmp;
    ::grpo::run::RunDirectory dir(tmp.path().toStdString() + "/run");
    const std::string metrics = dir.path("metrics.jsonl");
    for (int i = 1; i <= 3; ++i) dir.append_jsonl("metrics.jsonl", {{"step", i}, {"loss", 0.5}});
    const std::string before = ::grpo::read_file(metrics);
    {
      FileSizeLimit limit(before.size() + 10);  // room for 10 bytes of the next line only
      const nlohmann::json big = {{"step", 4}, {"text", std::string(200, 'x')}};
      try {
        dir.append_jsonl("metrics.jsonl", big);
        QFAIL("an append past the file-size limit succeeded");
      } catch (const ::grpo::Error& e) {
        QVERIFY2(std::string(e.what()).find(std::strerror(EFBIG)) != std::string::npos, e.what());
        QVERIFY2(std::string(e.what()).find(metrics) != std::string::npos, e.what());
        QCOMPARE(::grpo::run::storage_fault_of(e.what()), std::string(std::strerror(EFBIG)));
      }
      QCOMPARE(::grpo::read_file(metrics), before);  // the 10 bytes that fit were cut off again
    }
    dir.append_jsonl("metrics.jsonl", {{"step", 4}, {"loss", 0.25}});
    auto lines = read_jsonl_strict(metrics);
    QCOMPARE(lines.size(), size_t(4));
    QCOMPARE(lines[3]["step"], nlohmann::json(4));
  }

  // optimizer.pt goes through memory and one checked, synced write: a write that fails is a
  // grpo::Error naming the file (LibTorch's writer threw its own text, and never synced or checked
  // close, so SHA256SUMS could bless a short file), and nothing half-written is left behind.
  void optimizerStateUnderAFileSizeLimitFailsLoudly() {
    QTemporaryDir tmp;
    auto w = torch::randn({256, 256}, torch::kFloat32).requires_grad_(true);
    ::grpo::grpo::Optimizer opt({w}, {});
    (w * w).sum().backward();
    opt.step();
    const std::string path = tmp.path().toStdString() + "/optimizer.pt";
    {
      FileSizeLimit limit(64 * 1024);  // the moments alone are 2 x 256 KiB
      try {
        opt.save(path);
        QFAIL("saving past the file-size limit succeeded");
      } catch (const ::grpo::Error& e) {
        QVERIFY2(std::string(e.what()).find(path) != std::string::npos, e.what());
        QCOMPARE(::grpo::run::storage_fault_of(e.what()), std::string(std::strerror(EFBIG)));
      }
      QVERIFY(QDir(tmp.path()).entryList(QDir::Files | QDir::Hidden).isEmpty());
    }
    opt.save(path);  // room again: the moments and step come back as they were
    auto w2 = w.detach().clone().requires_grad_(true);
    ::grpo::grpo::Optimizer back({w2}, {});
    back.load(path);
    QCOMPARE(back.steps_done(), int64_t(1));
    (w * w).sum().backward();
    (w2 * w2).sum().backward();
    opt.step();
    back.step();
    QVERIFY(torch::equal(w, w2));  // same moments, same update
  }

  void failedPublicationLeavesNoVersionBehind() {
    QTemporaryDir tmp;
    ::grpo::run::RunDirectory dir(tmp.path().toStdString() + "/run");
    auto write = [](const std::string& d) {
      ::grpo::write_file_atomic(d + "/adapter_model.safetensors", std::string(64 * 1024, 'w'));
      ::grpo::write_file_atomic(d + "/adapter_config.json", "{}\n");
    };
    {
      FileSizeLimit limit(4096);
      try {
        dir.publish_adapter(1, write, 4);
        QFAIL("a publication past the file-size limit succeeded");
      } catch (const ::grpo::Error& e) {
        QCOMPARE(::grpo::run::storage_fault_of(e.what()), std::string(std::strerror(EFBIG)));
      }
      QVERIFY(dir.adapter_versions().empty());
      QVERIFY(QDir(QString::fromStdString(dir.path("adapters"))).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot).isEmpty());
    }
    dir.publish_adapter(1, write, 4);  // the same version, once writes succeed again
    QCOMPARE(dir.adapter_versions(), std::vector<int64_t>{1});
    QVERIFY(::grpo::run::verify_sha256sums(dir.adapter_dir(1)).empty());
    QCOMPARE(::grpo::run::storage_fault_of("x: write failed: Permission denied"), std::string());
    QVERIFY(!::grpo::run::describe_filesystem(dir.root()).empty());
  }

  void fullBucketPausesTheRunUntilSpaceIsBack() {
    // A private tmpfs for the run directory: root mounts one in a new mount namespace; without
    // root, a user namespace may allow it.
    QTemporaryDir tmp;
    const QString probe = tmp.path() + "/probe";
    QDir().mkpath(probe);
    const QString mount = "mount -t tmpfs -o size=1m tmpfs \"$0\"";
    QStringList unshare;
    if (::geteuid() == 0 && command_succeeds("unshare", {"-m", "sh", "-c", mount, probe}))
      unshare = {"-m"};
    else if (command_succeeds("unshare", {"-rm", "sh", "-c", mount, probe}))
      unshare = {"-rm"};
    else
      QSKIP("needs a private tmpfs: neither `unshare -m` + mount (as root) nor `unshare -rm` (user namespaces) works here");

    const std::string mnt = tmp.path().toStdString() + "/bucket", out = tmp.path().toStdString() + "/copy";
    const std::string run_dir = mnt + "/run";
    QDir().mkpath(QString::fromStdString(mnt));
    auto cfg = tiny_config(run_dir);
    cfg.max_steps = 16;
    cfg.save_steps = 2;
    const std::string cfg_path = tmp.path().toStdString() + "/run.json";
    ::grpo::write_file_atomic(cfg_path, cfg.to_json().dump(2));  // output_dir: cfg.output_dir

    // The tmpfs lives as long as the shell; the run directory is copied out before it goes.
    const QString script =
        "mount -t tmpfs -o size=32m tmpfs \"$0\" || exit 90; \"$1\" train \"$2\"; rc=$?; cp -a \"$0/run\" \"$3\"; exit $rc";
    ProcessGroup child;
    child.p.setProcessChannelMode(QProcess::MergedChannels);
    child.p.start("setsid", QStringList{"unshare"} + unshare +
                                QStringList{"sh", "-c", script, QString::fromStdString(mnt), GRPO_CLI,
                                            QString::fromStdString(cfg_path), QString::fromStdString(out)});
    QVERIFY2(child.p.waitForStarted(10000), "setsid unshare did not start");
    // The child's view of the tmpfs, through its root in its mount namespace.
    const std::string view = "/proc/" + std::to_string(child.p.processId()) + "/root" + run_dir;
    QByteArray log;
    auto wait_until = [&](const std::function<bool()>& done, int seconds) {
      QElapsedTimer t;
      t.start();
      while (!done() && t.elapsed() < seconds * 1000LL && child.p.state() == QProcess::Running) {
        child.p.waitForReadyRead(100);
        log += child.p.readAll();
      }
      log += child.p.readAll();
      return done();
    };

    QVERIFY2(wait_until([&] { return count_lines(view + "/metrics.jsonl") >= 3; }, 300),
             qPrintable("the run did not reach step 3:\n" + QString::fromUtf8(log)));
    // Fill the file system: big writes, then small ones, until it refuses.
    size_t filled = 0;
    {
      const std::string filler = view + "/../filler";
      int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      QVERIFY2(fd >= 0, std::strerror(errno));
      const std::string block(1 << 20, 'f');
      for (size_t chunk : {size_t(1) << 20, size_t(4096), size_t(1)})
        for (int i = 0; i < 100000; ++i) {  // bounded: 32 MiB in at most 32 + 256 + 4096 writes
          ssize_t n = ::write(fd, block.data(), chunk);
          if (n <= 0) break;
          filled += static_cast<size_t>(n);
        }
      ::close(fd);
    }
    qInfo("filled the bucket with %zu bytes at step %zu", filled, count_lines(view + "/metrics.jsonl"));
    QVERIFY2(wait_until([&] { return log.contains("(attempt 2)"); }, 300),
             qPrintable("the run did not pause and retry on a full bucket:\n" + QString::fromUtf8(log)));
    // ENOSPC's text from our writers (a checkpoint's .pt files go through them too).
    auto names_enospc = [](const std::string& s) { return s.find(std::strerror(ENOSPC)) != std::string::npos; };
    QVERIFY2(log.contains("bucket full or failing") && names_enospc(log.toStdString()), log.constData());
    // Paused: no progress, and nothing torn or half-published is visible.
    const size_t paused_at = count_lines(view + "/metrics.jsonl");
    QVERIFY2(wait_until([&] { return log.contains("(attempt 4)"); }, 120), log.constData());
    QCOMPARE(count_lines(view + "/metrics.jsonl"), paused_at);
    check_bucket_intact(view);
    QVERIFY(child.p.state() == QProcess::Running);

    // Space is back: the run resumes by itself and finishes.
    QVERIFY(::unlink((view + "/../filler").c_str()) == 0);
    wait_until([] { return false; }, 600);
    QVERIFY2(child.p.state() == QProcess::NotRunning, "grpo train did not finish within 10 minutes of space coming back");
    QVERIFY2(child.p.exitStatus() == QProcess::NormalExit && child.p.exitCode() == 0, log.constData());

    const std::string copy = out;
    auto metrics = read_jsonl_strict(copy + "/metrics.jsonl");
    QCOMPARE(metrics.size(), size_t(cfg.max_steps));
    for (size_t i = 0; i < metrics.size(); ++i) QCOMPARE(metrics[i]["step"].get<int64_t>(), int64_t(i + 1));
    check_bucket_intact(copy);
    // The fault and its end are in events.jsonl (written once space was back), in order, with advice.
    auto events = read_jsonl_strict(copy + "/events.jsonl");
    int failed_at = -1, cleared_at = -1, finished_at = -1;
    for (int i = 0; i < static_cast<int>(events.size()); ++i) {
      const std::string kind = events[i].value("event", "");
      if (kind == "bucket_write_failed" && failed_at < 0) failed_at = i;
      if (kind == "bucket_write_failed_cleared" && cleared_at < 0) cleared_at = i;
      if (kind == "finished") finished_at = i;
    }
    QVERIFY2(failed_at >= 0 && cleared_at > failed_at && finished_at > cleared_at, qPrintable(QString::fromUtf8(log)));
    const auto& e = events[failed_at];
    QCOMPARE(e["severity"], nlohmann::json("error"));
    const std::string message = e["message"], advice = e["advice"];
    QVERIFY2(message.find(run_dir) != std::string::npos && names_enospc(message), message.c_str());
    QVERIFY2(advice.find("free space on " + mnt + " (tmpfs") != std::string::npos, advice.c_str());
    QVERIFY2(advice.find("resumes by itself") != std::string::npos, advice.c_str());
    QCOMPARE(events_named(copy, "resume").size(), size_t(0));  // not a user pause
  }

  // The app learns of a full bucket while it is full: EngineSession delivers events as the engine
  // raises them, although events.jsonl cannot take them yet, and each exactly once when the file
  // catches up.
  void sessionSeesAFullBucketWhileItIsFull() {
    QTemporaryDir tmp;
    const auto cfg = short_run(tmp);
    const std::string events_path = cfg.output_dir + "/events.jsonl";
    std::mutex mu;
    std::vector<nlohmann::json> seen;
    std::atomic<int64_t> step{0};
    std::atomic<bool> done{false};
    std::string error;
    ::grpo::run::SessionCallbacks cb;
    cb.on_event = [&](const ::grpo::run::EngineEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(e.data);
    };
    cb.on_step = [&](const ::grpo::run::StepReport& r) { step = r.step; };
    cb.on_done = [&](const std::string&, const std::string& err) {
      std::lock_guard<std::mutex> lock(mu);
      error = err;
      done = true;
    };
    auto seen_named = [&](const std::string& kind) {
      std::lock_guard<std::mutex> lock(mu);
      return std::count_if(seen.begin(), seen.end(), [&](const nlohmann::json& e) { return e.value("event", "") == kind; });
    };
    ::grpo::run::EngineSession session;
    session.start(cfg, cfg.output_dir, {}, cb);
    QVERIFY2(wait_for([&] { return step.load() >= 2 || done.load(); }, 300), "the run did not reach step 2");
    QVERIFY2(!done.load(), error.c_str());
    {
      // No file may grow past its size now: metrics.jsonl (longer than events.jsonl) and events.jsonl
      // refuse their next line, so the run pauses on bucket_write_failed.
      FileSizeLimit full(static_cast<rlim_t>(QFileInfo(QString::fromStdString(events_path)).size()));
      QVERIFY2(wait_for([&] { return seen_named("bucket_write_failed") > 0; }, 120),
               "the session did not report bucket_write_failed while the bucket was full");
      QCOMPARE(events_named(cfg.output_dir, "bucket_write_failed").size(), size_t(0));  // not in the file yet
      QCOMPARE(seen_named("bucket_write_failed_cleared"), 0L);
      QVERIFY(!done.load());
    }
    QVERIFY2(wait_for([&] { return done.load(); }, 300), "the run did not finish once space was back");
    QVERIFY2(error.empty(), error.c_str());
    session.wait();
    // Every line of events.jsonl reached the session exactly once, the fault among them.
    auto file = read_jsonl_strict(events_path);
    std::multiset<std::string> in_file, delivered;
    for (const auto& e : file) in_file.insert(e.dump());
    for (const auto& e : seen) delivered.insert(e.dump());
    QCOMPARE(delivered.size(), in_file.size());
    QVERIFY2(delivered == in_file, "the session's events differ from events.jsonl");
    // Each event the trainer raised carries its identity, a seq unique in the run (docs/formats.md,
    // "events.jsonl"), by which the session told its live copy from its line.
    std::set<int64_t> seqs;
    for (const auto& e : file) {
      if (!e.contains("seq")) continue;  // another writer's line (a source's accounting)
      QVERIFY2(e["seq"].is_number_integer(), e.dump().c_str());
      QVERIFY2(seqs.insert(e["seq"].get<int64_t>()).second, ("a seq seen twice: " + e.dump()).c_str());
    }
    QVERIFY2(seqs.size() + 2 >= file.size(), "most events should carry a seq");
    QVERIFY(seqs.count(0) == 1);
    QCOMPARE(events_named(cfg.output_dir, "bucket_write_failed").size(), size_t(1));
    QCOMPARE(seen_named("bucket_write_failed_cleared"), 1L);
    QCOMPARE(seen_named("finished"), 1L);
    QCOMPARE(read_jsonl_strict(cfg.output_dir + "/metrics.jsonl").size(), size_t(cfg.max_steps));
  }

  // An attached app asks the trainer's endpoint: GET /grpo/events serves the events a full bucket
  // holds back, at the indices their lines get once space is back, so a client's since=N stays true.
  void endpointServesHeldEventsWhileTheBucketIsFull() {
    QTemporaryDir tmp;
    const auto cfg = short_run(tmp);
    const std::string events_path = cfg.output_dir + "/events.jsonl";
    ::grpo::run::Engine engine(cfg, cfg.output_dir);
    ::grpo::run::RunEndpointOptions eo;
    eo.bearer_token = "test-token";
    ::grpo::run::RunEndpoint endpoint(engine, eo);
    endpoint.start();
    const int port = QUrl(QString::fromStdString(endpoint.url())).port();
    auto events = [&] {
      auto r = ::grpo::testing::request(port, "GET", "/grpo/events?since=0", "test-token");
      return r.status == 200 ? r.j() : nlohmann::json();
    };
    auto has = [](const nlohmann::json& list, const std::string& kind) {
      return list.is_array() && std::any_of(list.begin(), list.end(), [&](const nlohmann::json& e) {
               return e.value("event", "") == kind;
             });
    };
    std::atomic<int64_t> step{0};
    std::atomic<bool> done{false};
    std::string error;
    std::thread runner([&] {
      try {
        engine.run([&](const ::grpo::run::StepReport& r) { step = r.step; });
      } catch (const std::exception& e) {
        error = e.what();
      }
      done = true;
    });
    struct Joiner {  // the run ends even when a check below fails
      ::grpo::run::Engine& e;
      std::thread& t;
      ~Joiner() {
        e.stop();
        if (t.joinable()) t.join();
      }
    } joiner{engine, runner};
    QVERIFY2(wait_for([&] { return step.load() >= 2 || done.load(); }, 300), "the run did not reach step 2");
    nlohmann::json served_while_full;
    {
      FileSizeLimit full(static_cast<rlim_t>(QFileInfo(QString::fromStdString(events_path)).size()));
      QVERIFY2(wait_for([&] { return has(served_while_full = events(), "bucket_write_failed"); }, 120),
               "GET /grpo/events did not show bucket_write_failed while the bucket was full");
      QVERIFY(!has(nlohmann::json(read_jsonl_strict(events_path)), "bucket_write_failed"));  // not in the file yet
      QVERIFY(!done.load());
    }
    QVERIFY2(wait_for([&] { return done.load(); }, 300), "the run did not finish once space was back");
    QVERIFY2(error.empty(), error.c_str());
    // What was served while full is where it now stands in the file, and the file is what is served.
    const auto file = read_jsonl_strict(events_path);
    QVERIFY(served_while_full.size() <= file.size());
    for (size_t i = 0; i < served_while_full.size(); ++i)
      QVERIFY2(served_while_full[i] == file[i], qPrintable(QString("line %1: served %2, file %3").arg(i)
                   .arg(QString::fromStdString(served_while_full[i].dump())).arg(QString::fromStdString(file[i].dump()))));
    QCOMPARE(events(), nlohmann::json(file));
    endpoint.stop();
  }

  void rewardProgramThatNeverAnswersLeavesSamplesUnscorable() {
    QTemporaryDir tmp;
    const std::string script = tmp.path().toStdString() + "/hang.py";
    std::ofstream(script) << "import sys, time\nfor line in sys.stdin:\n    time.sleep(3600)\n";
    auto cfg = tiny_config(tmp.path().toStdString() + "/run");
    cfg.max_steps = 2;
    cfg.save_steps = 0;
    cfg.reward_funcs = nlohmann::json::array({{{"name", "external"}, {"command", "exec python3 '" + script + "'"},
                                               {"timeout_s", 0.3}, {"startup_timeout_s", 0.5}}});
    ::grpo::run::Engine engine(cfg, cfg.output_dir);
    engine.run();  // returns: a program that never answers does not block training
    auto metrics = read_jsonl(cfg.output_dir + "/metrics.jsonl");
    QCOMPARE(metrics.size(), size_t(2));
    for (const auto& m : metrics) QCOMPARE(m["sample/unscorable_frac"].get<double>(), 1.0);
    auto timeouts = events_named(cfg.output_dir, "reward_timeout");
    QVERIFY(!timeouts.empty());
    QCOMPARE(timeouts[0]["severity"], nlohmann::json("warning"));
    QVERIFY2(timeouts[0]["message"].get<std::string>().find("hang.py") != std::string::npos, timeouts[0].dump().c_str());
    QVERIFY(!timeouts[0]["advice"].get<std::string>().empty());
    QCOMPARE(events_named(cfg.output_dir, "finished").size(), size_t(1));
  }
};

QTEST_GUILESS_MAIN(TestEngineBucketFull)
#include "test_engine_bucket_full.moc"
