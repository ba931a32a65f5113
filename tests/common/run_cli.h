// Runs the built `grpo` CLI (GRPO_CLI, set by grpo_test) as a user would: its arguments, the
// environment (the test's own unless given), and a bounded wait after which it is killed.
#pragma once

#include "tests/common/test_paths.h"
#include <QProcess>
#include <QProcessEnvironment>
#include <QStringList>

#include <string>

struct CliResult {
  int code = -1;    // the exit code; -1: did not start, crashed or timed out
  std::string out;  // stdout, then stderr ("timed out" when killed)
};

inline CliResult run_cli(const QStringList& args, int timeout_ms = 600000,
                         const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess p;
  p.setProcessChannelMode(QProcess::SeparateChannels);
  p.setProcessEnvironment(env);
  p.start(GRPO_CLI, args);
  CliResult r;
  if (!p.waitForStarted(10000)) return r;
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished(5000);
    r.out = "timed out";
    return r;
  }
  r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
  r.out = p.readAllStandardOutput().toStdString() + p.readAllStandardError().toStdString();
  return r;
}
