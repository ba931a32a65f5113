// ChildProcess: a QProcess that is killed (and reaped, within 10 s) when the test leaves its
// scope, so a failed check never leaves a trainer or worker running behind the test.
#pragma once

#include <QProcess>

namespace grpo::testing {

struct ChildProcess {
  QProcess p;
  ~ChildProcess() {
    if (p.state() != QProcess::NotRunning) {
      p.kill();
      p.waitForFinished(10000);
    }
  }
};

}  // namespace grpo::testing
