// The abuse suite (issue 18): a real `grpo worker` and a real `grpo train --demo --serve` process
// (trained until it has published an adapter, then paused) on loopback, attacked as a peer on the network would: some cases without the token, some with a
// leaked one. For every case the test asserts that
//   - the process is still alive,
//   - authenticated requests made by a probe thread all through the abuse were answered, each
//     within kAnswerWithinMs (1 s; 5 s under the sanitizers),
//   - its resident memory grew by less than kMaxRssGrowthMib,
// and it prints a table (case, RSS before/after, p99 latency of the probe) that BENCHMARKS.md
// quotes. Every loop is bounded in count and time. Only 127.0.0.1 is used: the starvation case of
// the issue came from 127.0.0.2-5, which the project's tests may not use, so here the strangers
// come from the trainer's own address, which is harder (the per-address limit is shared with it).
#include "tests/common/test_paths.h"
#include <QElapsedTimer>
#include <QStandardPaths>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster/cluster_token.h"
#include "tests/common/child_process.h"
#include "tests/common/raw_http.h"

using grpo::testing::ChildProcess;
using grpo::testing::request;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int kAnswerWithinMs = 5000;  // ASan slows every request several times
constexpr int64_t kMaxRssGrowthMib = 160;
#else
constexpr int kAnswerWithinMs = 1000;
constexpr int64_t kMaxRssGrowthMib = 64;
#endif

int64_t rss_kib(qint64 pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  for (int i = 0; i < 200 && f >> key; ++i) {
    if (key == "VmRSS:") {
      int64_t kib = 0;
      f >> kib;
      return kib;
    }
    std::string rest;
    std::getline(f, rest);
  }
  return -1;
}

// Authenticated requests every 25 ms on fresh connections while an attack runs; their latencies.
class Probe {
public:
  Probe(int port, QByteArray path, QByteArray token) : port_(port), path_(std::move(path)), token_(std::move(token)) {
    thread_ = std::thread([this] {
      for (int i = 0; i < 4000 && !stop_; ++i) {  // at most 4000 probes (about 100 s)
        const auto t0 = Clock::now();
        const int status = request(port_, "GET", path_, token_).status;
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        {
          std::lock_guard<std::mutex> lock(mu_);
          latencies_.push_back(ms);
          if (status != 200) failure_statuses_ += (failures_++ ? "," : "") + std::to_string(status);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
    });
  }
  ~Probe() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // p99 and max in ms; count and failures.
  double percentile(double q) const {
    std::vector<double> v = latencies_;
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  }
  size_t count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return latencies_.size();
  }
  // Waits until `n` probes have been answered (or failed), at most `timeout_ms`: the check asks for
  // probes made after the attack, however slowly a loaded machine schedules this thread.
  void wait_for(size_t n, int timeout_ms) const {
    const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (int i = 0; i < 100000 && count() < n && Clock::now() < until; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  int failures() const { return failures_; }
  const std::string& failure_statuses() const { return failure_statuses_; }  // 0: no answer
  double max() const { return latencies_.empty() ? -1 : *std::max_element(latencies_.begin(), latencies_.end()); }

private:
  int port_;
  QByteArray path_, token_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<double> latencies_;
  int failures_ = 0;
  std::string failure_statuses_;
  std::thread thread_;
};

struct Row {
  std::string target, attack;
  int64_t rss_before_kib = 0, rss_after_kib = 0;
  double p99_ms = 0, max_ms = 0;
  size_t probes = 0;
};

// A socket that sends bytes as given and reads whatever comes back (bounded waits).
struct Raw {
  QTcpSocket s;
  explicit Raw(int port) {
    s.connectToHost("127.0.0.1", static_cast<quint16>(port));
    s.waitForConnected(5000);
  }
  bool connected() const { return s.state() == QAbstractSocket::ConnectedState; }
  void send(const QByteArray& bytes, int wait_ms = 5000) {
    s.write(bytes);
    for (int i = 0; i < 1000 && s.bytesToWrite() > 0 && s.state() == QAbstractSocket::ConnectedState; ++i)
      if (!s.waitForBytesWritten(wait_ms)) break;
  }
  // The status of the first response within `ms` (0: none, e.g. the server closed without one).
  int status(int ms = 10000) {
    QByteArray in;
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < ms && in.indexOf("\r\n") < 0) {
      if (!s.waitForReadyRead(100) && s.state() != QAbstractSocket::ConnectedState) break;
      in += s.readAll();
    }
    in += s.readAll();
    return in.startsWith("HTTP/1.1 ") ? in.mid(9, 3).toInt() : 0;
  }
  bool closed_by_peer(int ms) {
    QElapsedTimer t;
    t.start();
    while (s.state() != QAbstractSocket::UnconnectedState) {  // at least one look
      s.waitForReadyRead(std::min(ms, 100));
      s.readAll();
      if (t.elapsed() >= ms) break;
    }
    return s.state() == QAbstractSocket::UnconnectedState;
  }
};

QByteArray post_head(const QByteArray& path, const QByteArray& token, qint64 length) {
  QByteArray h = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
  if (!token.isEmpty()) h += "Authorization: Bearer " + token + "\r\n";
  return h + "Content-Length: " + QByteArray::number(length) + "\r\n\r\n";
}

QByteArray nested(int depth) { return QByteArray(depth, '[') + QByteArray(depth, ']'); }

}  // namespace

class TestAbuse : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  ChildProcess worker_, trainer_;
  QByteArray token_;
  int worker_port_ = 0, trainer_port_ = 0;
  QByteArray adapter_file_;  // a published adapter's safetensors in the trainer's bucket
  qsizetype adapter_bytes_ = 0;
  std::vector<Row> rows_;

  ChildProcess& process_of(const std::string& target) { return target == "worker" ? worker_ : trainer_; }
  int port_of(const std::string& target) const { return target == "worker" ? worker_port_ : trainer_port_; }
  static QByteArray probe_path(const std::string& target) { return target == "worker" ? "/health" : "/grpo/run"; }

  // Runs `attack` against `target` with the probe going, then checks the three promises.
  void abuse(const std::string& target, const std::string& name, const std::function<void()>& attack) {
    ChildProcess& child = process_of(target);
    QVERIFY2(child.p.state() == QProcess::Running, (target + " is not running before " + name).c_str());
    Row row{target, name};
    row.rss_before_kib = rss_kib(child.p.processId());
    Probe probe(port_of(target), probe_path(target), token_);
    attack();
    probe.wait_for(probe.count() + 3, 30000);  // three probes after the attack too
    probe.finish();
    row.rss_after_kib = rss_kib(child.p.processId());
    row.p99_ms = probe.percentile(0.99);
    row.max_ms = probe.max();
    row.probes = probe.count();
    rows_.push_back(row);
    const std::string what = target + " / " + name;
    QVERIFY2(child.p.state() == QProcess::Running, (what + ": the process died").c_str());
    QVERIFY2(probe.count() >= 3 && probe.failures() == 0,
             (what + ": " + std::to_string(probe.failures()) + " of " + std::to_string(probe.count()) +
              " authenticated requests failed (status " + probe.failure_statuses() + ")")
                 .c_str());
    QVERIFY2(row.max_ms <= kAnswerWithinMs,
             (what + ": an authenticated request took " + std::to_string(row.max_ms) + " ms").c_str());
    const auto t0 = Clock::now();  // and one more, now
    QCOMPARE(request(port_of(target), "GET", probe_path(target), token_).status, 200);
    QVERIFY(Clock::now() - t0 < std::chrono::milliseconds(kAnswerWithinMs));
    const int64_t growth_mib = (row.rss_after_kib - row.rss_before_kib) / 1024;
    QVERIFY2(row.rss_before_kib > 0 && growth_mib < kMaxRssGrowthMib,
             (what + ": resident memory grew by " + std::to_string(growth_mib) + " MiB").c_str());
  }

  int post_status(const std::string& target, const QByteArray& path, const QByteArray& body) {
    return request(port_of(target), "POST", path, token_, body).status;
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const std::string token_file = tmp_.path().toStdString() + "/cluster-token";
    token_ = QByteArray::fromStdString(grpo::cluster::load_or_create_token(token_file));
    // Under ASan a small quarantine, so that RSS measures what the program keeps, not what ASan does.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("ASAN_OPTIONS", env.value("ASAN_OPTIONS") + ":quarantine_size_mb=16");
    for (ChildProcess* c : {&worker_, &trainer_}) c->p.setProcessEnvironment(env);
    const QString w_out = tmp_.path() + "/worker.out", t_out = tmp_.path() + "/trainer.out";
    worker_.p.setStandardOutputFile(w_out);
    worker_.p.setStandardErrorFile(tmp_.path() + "/worker.err");
    worker_.p.start(GRPO_CLI, {"worker", "--model", QString(GRPO_RESOURCES) + "/models/tiny-arith", "--listen",
                               "127.0.0.1:0", "--token-file", QString::fromStdString(token_file), "--threads", "1",
                               "--max-batch", "16", "--max-queue", "8"});
    trainer_.p.setStandardOutputFile(t_out);
    trainer_.p.setStandardErrorFile(tmp_.path() + "/trainer.err");
    // A long run: the test ends it (the child is killed when the test ends).
    // An adapter after every step: the first one appears soon, then the run is paused (below).
    trainer_.p.start(GRPO_CLI, {"train", "--demo", "--steps", "100000", "--set", "weight_sync_steps=1", "--serve", "127.0.0.1:0",
                                "--cluster-token-file", QString::fromStdString(token_file), "--output",
                                tmp_.path() + "/run"});
    QVERIFY(worker_.p.waitForStarted(10000) && trainer_.p.waitForStarted(10000));
    QByteArray seen;
    worker_port_ = QUrl(grpo::testing::wait_for_announced_url(worker_.p, "listening on ", 120, w_out, &seen)).port();
    QVERIFY2(worker_port_ > 0, (seen + grpo::testing::slurp(tmp_.path() + "/worker.err")).constData());
    trainer_port_ = QUrl(grpo::testing::wait_for_announced_url(trainer_.p, "serving run on ", 120, t_out, &seen)).port();
    QVERIFY2(trainer_port_ > 0, (seen + grpo::testing::slurp(tmp_.path() + "/trainer.err")).constData());
    // The trainer trains until it has published an adapter (the demo publishes every few steps),
    // then stays paused: it serves all the same, and ctest's other tests keep the CPU.
    grpo::testing::Http adapter;
    for (auto until = Clock::now() + std::chrono::seconds(240); Clock::now() < until && adapter.status != 200;) {
      const json run = request(trainer_port_, "GET", "/grpo/run", token_).j();
      const qint64 newest = run.is_object() ? run.value("policy_version", qint64(0)) : 0;
      if (newest >= 1) {
        QCOMPARE(post_status("trainer", "/grpo/run/pause", "{}"), 200);
        for (qint64 v = newest; v >= 1 && adapter.status != 200; --v) {  // the newest one not pruned
          adapter_file_ = "/grpo/bucket/policy-v" + QByteArray::number(v) + "/adapter_model.safetensors";
          adapter = request(trainer_port_, "GET", adapter_file_, token_);
        }
        if (adapter.status == 200) break;
        QCOMPARE(post_status("trainer", "/grpo/run/resume", "{}"), 200);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    QVERIFY2(adapter.status == 200, "the trainer published no adapter within 240 s");
    adapter_bytes_ = adapter.body.size();
  }

  // 100,000 levels of JSON nesting with the token: refused by the depth limit, no recursion.
  void deepJsonBody() {
    const QByteArray deep = nested(100000);
    abuse("worker", "JSON body nested 100,000 levels (token)", [&] {
      QCOMPARE(post_status("worker", "/v1/completions", "{\"prompt\":[1],\"temperature\":" + deep + "}"), 400);
    });
    abuse("trainer", "retune body nested 100,000 levels (token)", [&] {
      QCOMPARE(post_status("trainer", "/grpo/run/retune", "{\"learning_rate\":" + deep + "}"), 400);
    });
  }

  // Sizes that overflow: max_tokens = 2^63-1 with ignore_eos, and prompts x n above --max-batch.
  void oversizedWork() {
    abuse("worker", "max_tokens 2^63-1 + ignore_eos, prompts x n > --max-batch (token)", [&] {
      QCOMPARE(post_status("worker", "/v1/completions",
                           "{\"prompt\":[1],\"max_tokens\":9223372036854775807,\"ignore_eos\":true}"),
               400);
      QCOMPARE(post_status("worker", "/v1/completions", "{\"prompt\":[[1],[2],[3],[4],[5]],\"n\":4,\"max_tokens\":1}"), 400);
      json stops = json::array();
      for (int i = 0; i < 33; ++i) stops.push_back("stop" + std::to_string(i));
      QCOMPARE(post_status("worker", "/v1/completions",
                           QByteArray::fromStdString(json{{"prompt", {1}}, {"max_tokens", 1}, {"stop", stops}}.dump())),
               400);
      // A legitimate request is still generated.
      QCOMPARE(post_status("worker", "/v1/completions", "{\"prompt\":[1,2,3],\"max_tokens\":2}"), 200);
    });
    abuse("trainer", "retune top_k 1e300, max_completion_length 2^20 (token)", [&] {
      QCOMPARE(post_status("trainer", "/grpo/run/retune", "{\"top_k\":1e300}"), 400);
      QCOMPARE(post_status("trainer", "/grpo/run/retune", "{\"max_completion_length\":1048576}"), 400);
    });
  }

  // 40 completion requests at once (token): the queue holds 8 sequences, the rest hear 503.
  void queueFlood() {
    abuse("worker", "40 concurrent completions, queue of 8 sequences (token)", [&] {
      const QByteArray body = "{\"prompt\":[1,2,3],\"n\":4,\"max_tokens\":8,\"ignore_eos\":true}";
      std::vector<std::unique_ptr<Raw>> clients;
      for (int i = 0; i < 40; ++i) {
        clients.push_back(std::make_unique<Raw>(worker_port_));
        clients.back()->send(post_head("/v1/completions", token_, body.size()) + body);
      }
      int ok = 0, busy = 0, other = 0;
      for (auto& c : clients) {
        const int st = c->status(60000);
        (st == 200 ? ok : st == 503 ? busy : other) += 1;
      }
      QVERIFY2(ok >= 2 && busy >= 1 && other == 0,
               ("200: " + std::to_string(ok) + ", 503: " + std::to_string(busy) + ", other: " + std::to_string(other)).c_str());
    });
  }

  // 300 connections that never send a byte, from the same address as the probe.
  void idleConnectionsWithoutToken() {
    for (const std::string target : {"worker", "trainer"}) {
      std::vector<std::unique_ptr<Raw>> idle;
      abuse(target, "300 idle connections, no token", [&] {
        for (int i = 0; i < 300; ++i) idle.push_back(std::make_unique<Raw>(port_of(target)));
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
      });
      // Strangers are closed within the unauthenticated timeout (5 s), every one of them.
      int closed = 0;
      for (int round = 0; round < 80 && closed < static_cast<int>(idle.size()); ++round) {
        closed = 0;
        for (auto& c : idle) closed += c->closed_by_peer(10) ? 1 : 0;
      }
      QCOMPARE(closed, static_cast<int>(idle.size()));
    }
  }

  // 64 connections sending their headers one byte every 100 ms, without the token (slowloris).
  void slowHeadersWithoutToken() {
    abuse("worker", "64 slowloris connections, no token", [&] {
      std::vector<std::unique_ptr<Raw>> slow;
      for (int i = 0; i < 64; ++i) slow.push_back(std::make_unique<Raw>(worker_port_));
      const QByteArray head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
      for (int i = 0; i < 70; ++i) {  // 7 s: beyond the 5 s the server gives a stranger
        for (auto& c : slow)
          if (c->connected()) c->send(head.mid(i % head.size(), 1), 100);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      int closed = 0;
      for (auto& c : slow) closed += c->closed_by_peer(50) ? 1 : 0;
      QCOMPARE(closed, 64);
    });
  }

  // 64 MiB of bare CRLF before a request line, without the token.
  void crlfFlood() {
    abuse("worker", "64 MiB of CRLF before the request line, no token", [&] {
      Raw c(worker_port_);
      const QByteArray chunk = QByteArray("\r\n").repeated(512 * 1024);  // 1 MiB
      for (int i = 0; i < 64 && c.connected(); ++i) c.send(chunk, 2000);
      QVERIFY(c.closed_by_peer(5000));
    });
  }

  // Huge declared bodies: without the token refused before a byte of body is read; with it, 413.
  void hugeBodies() {
    abuse("worker", "Content-Length 10^18 - 1 with and without token", [&] {
      Raw a(worker_port_);
      a.send(post_head("/v1/completions", {}, 999999999999999999) + QByteArray(1 << 20, 'x'));
      QCOMPARE(a.status(), 401);
      Raw b(worker_port_);
      b.send(post_head("/v1/completions", token_, 999999999999999999));
      QCOMPARE(b.status(), 413);
      Raw c(worker_port_);  // a 19-digit length is refused as such, before any authentication
      c.send(post_head("/v1/completions", {}, qint64(1) << 62));
      QCOMPARE(c.status(), 400);
    });
  }

  // Pipelined requests whose replies are never read (token): back-pressure bounds the buffer.
  void unreadPipelinedReplies() {
    abuse("trainer", "4,000 pipelined adapter downloads (" + std::to_string(adapter_bytes_ / 1024) +
                         " KiB each) never read (token)", [&] {
      const QByteArray one = "GET " + adapter_file_ + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token_ + "\r\n\r\n";
      Raw c(trainer_port_);
      c.s.setReadBufferSize(64 * 1024);  // the client reads nothing: its kernel buffer fills
      c.s.write(one.repeated(4000));     // sent as the server reads it; never waited for in full
      c.s.waitForBytesWritten(2000);
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    });
    abuse("worker", "4,000 pipelined /v1/models never read (token)", [&] {
      const QByteArray one = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token_ + "\r\n\r\n";
      Raw c(worker_port_);
      c.s.setReadBufferSize(64 * 1024);
      c.s.write(one.repeated(4000));
      c.s.waitForBytesWritten(2000);
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    });
  }

  void cleanupTestCase() {
    // The table BENCHMARKS.md quotes ("Held under abuse").
    std::printf("\n| process | abuse | RSS before (MiB) | RSS after (MiB) | probes | p99 (ms) | max (ms) |\n"
                "|---|---|---|---|---|---|---|\n");
    for (const Row& r : rows_)
      std::printf("| %s | %s | %.1f | %.1f | %zu | %.1f | %.1f |\n", r.target.c_str(), r.attack.c_str(),
                  r.rss_before_kib / 1024.0, r.rss_after_kib / 1024.0, r.probes, r.p99_ms, r.max_ms);
    std::fflush(stdout);
  }
};

QTEST_GUILESS_MAIN(TestAbuse)
#include "test_abuse.moc"
