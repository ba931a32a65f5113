// The `external` reward: a program the user names, run once and spoken to in JSON lines.
//
// Protocol "sample" (the default; one line each way per sample, UTF-8, '\n'-terminated;
// reward_protocol.h parses the replies):
//   in  (our write to its stdin):  {"prompt": ..., "completion": ..., "answer": ... | null, <metadata>...}
//   out (its stdout):              {"reward": <number>}  or  {"reward": null}
// Protocol "batch" (one line each way per batch: a whole group of completions in one exchange,
// as TRL calls a reward function with lists):
//   in:   {"batch": [<the sample object above>, ...]}
//   out:  {"rewards": [<number or null>, ...]}   exactly one value per sample, in order
// resources/rewards/batch_reward_example.py is a complete program (Python, standard library only).
// In batch mode timeout_s bounds the whole exchange, and a failure leaves the whole batch None.
// The program is started with `/bin/sh -c <command>` in its own process group, on the first
// batch, with PYTHONUNBUFFERED=1 added to its environment so Python scripts flush each reply.
// (The shell may stay as the program's parent; "exec python3 x.py" replaces it.) Its stderr is
// drained continuously, a bounded amount per wait, and the last 2 KiB are kept for messages.
//
// A sample whose exchange fails is scored None (unscorable: advantage 0) and the cause is logged
// with the stderr tail; the program is then killed and restarted for the next sample. Failures:
//   timeout  no full reply line within timeout_s of sending the sample (first sample after a
//            start also gets startup_timeout_s, for slow imports)
//   crash    EOF on stdout, or a write to a dead program (EPIPE; SIGPIPE is blocked and consumed
//            on the writing thread, so it never kills our process)
//   flood    a reply line over 1 MiB, over 1 MiB of output for one sample, or more than one
//            line for one sample (a reply would be taken for the next sample's): memory stays
//            bounded and replies never shift onto the wrong sample
//   garbage  a reply that is not a JSON object with a numeric or null "reward"
// After max_consecutive_failures failures in a row the rest of the batch is None without
// another start (a broken command cannot stall a batch for batch * timeout); the next batch
// tries again. Nothing blocks forever: every wait is a poll() with a deadline.
// Faults are reported through the event sink once per episode: "reward_timeout",
// "reward_crashed", "reward_output_flood" or "reward_bad_reply" (severity warning, with advice)
// at the first failure of a kind, "<kind>_cleared" when a sample is scored again.
// Destruction closes its stdin, waits up to shutdown_grace_s for it to exit, then SIGKILLs the
// process group and reaps the child (no zombies). score() is serialized by a mutex.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/rollout/reward.h"
#include "core/rollout/reward_protocol.h"

namespace grpo::rollout {

struct ExternalRewardOptions {
  std::string command;              // shell command line, e.g. "python3 my_reward.py"
  double timeout_s = 10.0;          // per sample
  double startup_timeout_s = 30.0;  // extra allowance for the first sample after a (re)start
  double shutdown_grace_s = 1.0;    // wait for a clean exit before SIGKILL
  int max_consecutive_failures = 3;
  bool batch = false;               // protocol "batch": one exchange per batch
  std::string name = "external";
};

class ExternalReward : public RewardFunction {
public:
  explicit ExternalReward(ExternalRewardOptions options);
  ~ExternalReward() override;
  ExternalReward(const ExternalReward&) = delete;
  ExternalReward& operator=(const ExternalReward&) = delete;

  std::string name() const override { return options_.name; }
  std::vector<std::optional<double>> score(const std::vector<RewardInput>& batch) override;
  void set_event_sink(RewardEventSink sink) override;

  // Counters for tests and metrics.
  int starts() const { return starts_; }      // programs started so far
  int failures() const { return failures_; }  // samples that failed (not counting {"reward": null})
  pid_t pid() const { return pid_; }          // the running program, or -1
  // The line sent for one sample (metadata keys first, then prompt/completion/answer).
  static std::string request_line(const RewardInput& in);
  // The line sent for a batch: {"batch": [one object per sample, as request_line]}.
  static std::string batch_request_line(const std::vector<RewardInput>& batch);

private:
  enum class FailureKind { Timeout, Crash, Flood, BadReply };
  struct Failure {
    FailureKind kind = FailureKind::Crash;
    std::string cause;
  };
  void start();
  void stop(double grace_s);
  // One sample's exchange: the reward (or None for {"reward": null}), or a Failure.
  std::optional<double> exchange(const RewardInput& in, double timeout_s, std::optional<Failure>& failure);
  // The batch protocol: one exchange for every sample.
  std::vector<std::optional<double>> score_batch(const std::vector<RewardInput>& batch);
  std::vector<std::optional<double>> exchange_batch(const std::vector<RewardInput>& batch, std::optional<Failure>& failure);
  bool write_all(const std::string& data, double deadline, std::optional<Failure>& failure);
  std::optional<std::string> read_line(double deadline, std::optional<Failure>& failure);
  // Reads what the program printed that no one asked for; a Failure if it is not blank.
  bool check_unsolicited_output(std::optional<Failure>& failure);
  bool read_stdout_once(std::optional<Failure>& failure);  // one read(2) into framer_
  void drain_stderr();
  // Fault events: `kind` failed (nullopt: a sample was scored, which clears an open fault).
  void report(const std::optional<Failure>& failure, const std::string& tail);
  std::string stderr_tail() const;

  ExternalRewardOptions options_;
  std::mutex mutex_;
  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  ReplyFramer framer_;
  std::string err_tail_;
  bool fresh_ = false;  // no sample sent since the last start
  int starts_ = 0, failures_ = 0;
  RewardEventSink sink_;
  std::string open_fault_;   // the event kind reported and not yet cleared, or ""
  int fault_failures_ = 0;   // failures since open_fault_ was reported
};

}  // namespace grpo::rollout
