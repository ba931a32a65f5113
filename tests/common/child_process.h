// Child processes in tests (a trainer, a worker): ChildProcess is a QProcess that is killed (and
// reaped, within 10 s) when the test leaves its scope, so a failed check never leaves a server
// running (and killed by the kernel when the test process dies: PR_SET_PDEATHSIG); wait_for_announced_url reads the "<marker>http(s)://HOST:PORT" line a server prints when
// it is ready (grpo worker: "listening on ", grpo train --serve: "serving run on ").
#pragma once

#include <signal.h>
#include <sys/prctl.h>

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QString>

namespace grpo::testing {

struct ChildProcess {
  QProcess p;
  // The child dies with the test process too, even when the test is killed (a watchdog's abort,
  // ctest's timeout) and this destructor never runs.
  ChildProcess() { p.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); }); }
  ~ChildProcess() {
    if (p.state() != QProcess::NotRunning) {
      p.kill();
      p.waitForFinished(10000);
    }
  }
};

// A whole file's bytes, or empty when it cannot be read.
inline QByteArray slurp(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// Waits at most `seconds` for `p` to print `marker` followed by an http(s):// URL and a newline, and
// returns the URL ("" when the process ends or time runs out first). The output is read from
// `out_file` when given (children writing to files never block on a full pipe), else from the
// process's stdout pipe. `seen`, when given, receives everything read (for failure messages).
inline QString wait_for_announced_url(QProcess& p, const QByteArray& marker, int seconds,
                                      const QString& out_file = {}, QByteArray* seen = nullptr) {
  const QByteArray needle = marker + "http";  // http:// or https://
  QByteArray out;
  QElapsedTimer t;
  t.start();
  QString url;
  while (url.isEmpty() && t.elapsed() < seconds * 1000LL && p.state() == QProcess::Running) {
    if (out_file.isEmpty()) {
      p.waitForReadyRead(200);
      out += p.readAllStandardOutput();
    } else {
      p.waitForFinished(200);
      out = slurp(out_file);
    }
    const int at = out.indexOf(needle), end = at < 0 ? -1 : out.indexOf('\n', at);
    if (end > at) url = QString::fromUtf8(out.mid(at + marker.size(), end - at - marker.size()).trimmed());
  }
  if (seen) *seen = out;
  return url;
}

}  // namespace grpo::testing
