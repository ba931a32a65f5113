// Running a short-lived command (a scheduler's sbatch, squeue, scancel) with every limit set: no
// shell (argv as given, found on PATH), stdin closed, stdout and stderr each kept up to a cap
// (the rest is read and dropped, so the child never blocks on a full pipe), and a deadline after
// which its process group is killed and reaped. Never throws for what the command does (a
// non-zero exit, a signal, a timeout are in the result); throws grpo::Error when it cannot be
// started. No Qt, no torch.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace grpo {

struct CommandLimits {
  double timeout_s = 30;                 // then SIGKILL to its process group
  size_t max_output_bytes = 1 << 20;     // kept of stdout, and again of stderr
  std::vector<std::string> extra_env;    // "NAME=value" added to (or replacing in) the environment
};

struct CommandResult {
  int exit_code = -1;        // its exit status; -1 when it was killed or died of a signal
  int signal = 0;            // the signal that ended it, 0 if none
  bool timed_out = false;    // killed at the deadline
  bool truncated = false;    // stdout or stderr went past max_output_bytes
  std::string out, err;
  bool ok() const { return exit_code == 0 && !timed_out; }
  // "exit 1: <the last line of stderr>", "killed after 30 s", "signal 9", for messages.
  std::string describe() const;
};

// Runs argv[0] (looked up on PATH when it has no '/') with argv. Throws grpo::Error naming the
// program when argv is empty or it cannot be started (not found, not executable).
CommandResult run_command(const std::vector<std::string>& argv, const CommandLimits& limits = {});

}  // namespace grpo
