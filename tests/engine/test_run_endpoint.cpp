// The trainer's HTTP endpoint end to end: a real `grpo train --demo --serve 127.0.0.1:0` process,
// spoken to over raw HTTP/1.1 on loopback (raw, so paths like /grpo/bucket/../x reach the server
// unnormalised). Checks bearer auth (401), /grpo/run progress, /grpo/metrics?since=N, /grpo/events?since=N, pause
// holding the step and resume continuing it, retune accepted/refused (400 naming the key), the
// read-only adapter bucket (bytes equal to the file on disk, and a real `grpo worker` loading an
// adapter by its bucket URL; "..", encoded "..", symlinks out of
// adapters/ refused; 404 for missing), and stop ending the process with exit status 0.
#include "tests/common/test_paths.h"
#include <QFile>
#include <QProcess>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QtTest>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/cluster/cluster_token.h"
#include "tests/common/child_process.h"
#include "tests/common/raw_http.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

using grpo::testing::Http;
using grpo::testing::request;

using Child = grpo::testing::ChildProcess;  // killed if the test leaves early
using grpo::testing::slurp;

}  // namespace

class TestRunEndpoint : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void servesStateMetricsControlAndBucket() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const std::string token_file = tmp.path().toStdString() + "/cluster-token";
    const QByteArray token = QByteArray::fromStdString(grpo::cluster::load_or_create_token(token_file));
    const QString run_dir = tmp.path() + "/run";

    Child child;
    // Output to files: an unread pipe would fill up and block the trainer while the test talks HTTP.
    const QString out_file = tmp.path() + "/stdout.txt", err_file = tmp.path() + "/stderr.txt";
    child.p.setStandardOutputFile(out_file);
    child.p.setStandardErrorFile(err_file);
    // Enough steps that the run is still going when pause/resume are checked; stop ends it early.
    // An adapter every 2 steps (the demo's 10 made the bucket check wait minutes under ASan).
    child.p.start(GRPO_CLI, {"train", "--demo", "--steps", "400", "--set", "weight_sync_steps=2", "--serve", "127.0.0.1:0",
                             "--cluster-token-file", QString::fromStdString(token_file), "--output", run_dir});
    QVERIFY(child.p.waitForStarted(10000));
    QByteArray out;
    const int port =
        QUrl(grpo::testing::wait_for_announced_url(child.p, "serving run on ", 120, out_file, &out)).port();
    QVERIFY2(port > 0, (out + slurp(err_file)).constData());

    // Bearer auth: none, or a wrong token -> 401.
    QCOMPARE(request(port, "GET", "/grpo/run", {}).status, 401);
    QCOMPARE(request(port, "GET", "/grpo/run", "wrong").status, 401);
    QCOMPARE(request(port, "GET", "/grpo/bucket/policy-v0/SHA256SUMS", {}).status, 401);

    auto run = [&] { return request(port, "GET", "/grpo/run", token).j(); };
    auto wait_step_above = [&](int64_t s, int seconds) {
      json st;
      for (auto d = Clock::now() + std::chrono::seconds(seconds); Clock::now() < d;) {
        st = run();
        if (st.is_object() && st.value("step", int64_t(-1)) > s) return st;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      return st;
    };

    json st = wait_step_above(1, 180);
    QVERIFY2(st.is_object() && st["step"].get<int64_t>() >= 2, st.dump().c_str());
    QCOMPARE(st["max_steps"].get<int64_t>(), int64_t(400));
    QCOMPARE(st["run_dir"].get<std::string>(), run_dir.toStdString());
    QCOMPARE(st["paused"].get<bool>(), false);
    QVERIFY(st["last_metrics"].is_object() && st["last_metrics"].contains("loss"));
    const int64_t s1 = st["step"].get<int64_t>();
    st = wait_step_above(s1, 120);
    QVERIFY2(st["step"].get<int64_t>() > s1, st.dump().c_str());  // the step grows

    // /grpo/metrics?since=N: exactly the records with step > N, ascending.
    const int64_t n = s1 - 1;
    Http m = request(port, "GET", "/grpo/metrics?since=" + QByteArray::number(qint64(n)), token);
    QCOMPARE(m.status, 200);
    json recs = m.j();
    QVERIFY(recs.is_array() && recs.size() >= 2);
    for (size_t i = 0; i < recs.size(); ++i) QCOMPARE(recs[i]["step"].get<int64_t>(), n + 1 + int64_t(i));
    json all = request(port, "GET", "/grpo/metrics", token).j();
    QVERIFY(all.is_array() && all.size() >= recs.size() && all[0]["step"].get<int64_t>() == 1);
    QCOMPARE(request(port, "GET", "/grpo/metrics?since=x", token).status, 400);

    // Pause holds the step; resume continues it.
    QCOMPARE(request(port, "POST", "/grpo/run/pause", token).j(), json({{"ok", true}}));
    for (auto d = Clock::now() + std::chrono::seconds(120); Clock::now() < d;) {
      st = run();
      if (st.value("state", "") == "paused") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    QVERIFY2(st.value("state", "") == "paused" && st["paused"].get<bool>(), st.dump().c_str());
    const int64_t held = st["step"].get<int64_t>();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    QCOMPARE(run()["step"].get<int64_t>(), held);
    QCOMPARE(request(port, "POST", "/grpo/run/resume", token).j(), json({{"ok", true}}));
    st = wait_step_above(held, 120);
    QVERIFY2(st["step"].get<int64_t>() > held && !st["paused"].get<bool>(), st.dump().c_str());

    // Retune: accepted, or 400 naming the key.
    Http ok = request(port, "POST", "/grpo/run/retune", token, R"({"learning_rate": 0.002})");
    QCOMPARE(ok.status, 200);
    Http bad = request(port, "POST", "/grpo/run/retune", token, R"({"learning_rate": -1})");
    QCOMPARE(bad.status, 400);
    QVERIFY2(bad.body.contains("learning_rate"), bad.body.constData());
    QCOMPARE(request(port, "POST", "/grpo/run/retune", token, "[1]").status, 400);

    // /grpo/events?since=N: events.jsonl's lines from index N, one element per line, same auth.
    QCOMPARE(request(port, "GET", "/grpo/events", {}).status, 401);
    QCOMPARE(request(port, "GET", "/grpo/events?since=x", token).status, 400);
    json evs = request(port, "GET", "/grpo/events", token).j();
    QVERIFY2(evs.is_array() && evs.size() >= 3, evs.dump().c_str());
    std::vector<json> file_events;
    for (const auto& line : slurp(run_dir + "/events.jsonl").split('\n'))
      if (!line.trimmed().isEmpty()) file_events.push_back(json::parse(line.toStdString()));
    QVERIFY(file_events.size() >= evs.size());
    for (size_t i = 0; i < evs.size(); ++i) QCOMPARE(evs[i], file_events[i]);
    size_t at_pause = evs.size(), at_resume = evs.size();
    for (size_t i = 0; i < evs.size(); ++i) {
      if (evs[i].value("event", "") == "pause" && at_pause == evs.size()) at_pause = i;
      if (evs[i].value("event", "") == "resume" && i > at_pause && at_resume == evs.size()) at_resume = i;
    }
    QVERIFY2(at_pause < at_resume && at_resume < evs.size(), evs.dump().c_str());
    json from = request(port, "GET", "/grpo/events?since=" + QByteArray::number(qint64(at_resume)), token).j();
    QVERIFY(from.is_array() && from.size() >= evs.size() - at_resume);
    QCOMPARE(from[0], evs[at_resume]);
    QCOMPARE(request(port, "GET", "/grpo/events?since=1000000", token).j(), json::array());

    // The bucket: the published adapter's files, byte for byte (retry if the version was pruned
    // between reading it from disk and fetching it).
    bool fetched = false;
    for (auto d = Clock::now() + std::chrono::seconds(120); Clock::now() < d && !fetched;) {
      const int64_t v = run().value("policy_version", int64_t(0));
      for (const char* name : {"SHA256SUMS", "adapter_config.json", "adapter_model.safetensors"}) {
        const QString rel = QString("policy-v%1/%2").arg(v).arg(name);
        QFile f(run_dir + "/adapters/" + rel);
        if (v < 1 || !f.open(QIODevice::ReadOnly)) break;
        const QByteArray disk = f.readAll();
        Http b = request(port, "GET", "/grpo/bucket/" + rel.toUtf8(), token);
        if (b.status == 404) break;
        QCOMPARE(b.status, 200);
        QCOMPARE(b.body, disk);
        fetched = std::string(name) == "adapter_model.safetensors";
      }
      if (!fetched) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    QVERIFY(fetched);
    QCOMPARE(request(port, "GET", "/grpo/bucket/../config.json", token).status, 403);
    QCOMPARE(request(port, "GET", "/grpo/bucket/%2e%2e/config.json", token).status, 403);
    QCOMPARE(request(port, "GET", "/grpo/bucket/policy-v1//SHA256SUMS", token).status, 403);
    QCOMPARE(request(port, "GET", "/grpo/bucket/policy-v1%2f..%2f..%2fconfig.json", token).status, 403);
    QCOMPARE(request(port, "GET", "/grpo/bucket/%2fetc%2fpasswd", token).status, 403);  // absolute
    QCOMPARE(request(port, "GET", "/grpo/bucket/policy-v1%00/SHA256SUMS", token).status, 403);
    QCOMPARE(request(port, "GET", "/grpo/bucket/%252e%252e/config.json", token).status, 404);  // decoded once
    QCOMPARE(request(port, "GET", "/grpo/bucket/policy-v999999/SHA256SUMS", token).status, 404);
    QCOMPARE(request(port, "GET", "/grpo/bucket/", token).status, 404);
    std::filesystem::create_symlink((run_dir + "/config.json").toStdString(), (run_dir + "/adapters/escape").toStdString());
    QCOMPARE(request(port, "GET", "/grpo/bucket/escape", token).status, 403);
    std::filesystem::create_directory_symlink(run_dir.toStdString(), (run_dir + "/adapters/escape-dir").toStdString());
    QCOMPARE(request(port, "GET", "/grpo/bucket/escape-dir/config.json", token).status, 403);
    QCOMPARE(request(port, "POST", "/grpo/bucket/escape", token).status, 405);

    // A real `grpo worker` loads a published adapter through the bucket URL (it fetches SHA256SUMS,
    // then every file listed, with the cluster token, and verifies them), and serves it.
    QCOMPARE(request(port, "POST", "/grpo/run/pause", token).status, 200);
    for (auto d = Clock::now() + std::chrono::seconds(120); Clock::now() < d && run().value("state", "") != "paused";)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const int64_t version = run().value("policy_version", int64_t(0));
    QVERIFY(version >= 1);
    {
      Child worker;
      const QString wout = tmp.path() + "/worker.txt";
      worker.p.setStandardOutputFile(wout);
      worker.p.setStandardErrorFile(tmp.path() + "/worker-err.txt");
      worker.p.start(GRPO_CLI, {"worker", "--model", QString(GRPO_RESOURCES) + "/models/tiny-arith", "--listen",
                                "127.0.0.1:0", "--token-file", QString::fromStdString(token_file), "--threads", "1"});
      QVERIFY(worker.p.waitForStarted(10000));
      const int wport = QUrl(grpo::testing::wait_for_announced_url(worker.p, "listening on ", 120, wout)).port();
      QVERIFY2(wport > 0, slurp(tmp.path() + "/worker-err.txt").constData());
      const json load = {{"lora_name", "policy"},
                         {"lora_path", "http://127.0.0.1:" + std::to_string(port) + "/grpo/bucket/policy-v" + std::to_string(version)}};
      Http l = request(wport, "POST", "/v1/load_lora_adapter", token, QByteArray::fromStdString(load.dump()));
      QVERIFY2(l.status == 200, l.body.constData());
      Http c = request(wport, "POST", "/v1/completions", token, R"({"model": "policy", "prompt": "1+1=", "max_tokens": 2})");
      QVERIFY2(c.status == 200 && c.j()["choices"].size() == 1, c.body.constData());
    }
    QCOMPARE(request(port, "POST", "/grpo/run/resume", token).status, 200);

    // Stop ends the process cleanly.
    QCOMPARE(request(port, "POST", "/grpo/run/stop", token).j(), json({{"ok", true}}));
    QVERIFY(child.p.waitForFinished(180000));
    QCOMPARE(child.p.exitStatus(), QProcess::NormalExit);
    QVERIFY2(child.p.exitCode() == 0, slurp(err_file).constData());
    QVERIFY(slurp(out_file).contains("stopped; final adapter: "));
  }
};

QTEST_GUILESS_MAIN(TestRunEndpoint)
#include "test_run_endpoint.moc"
