// The `external` reward: child-process management and the JSON-lines exchange (see the header).
#include "core/rollout/external_reward.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/common/error.h"
#include "core/common/log.h"
#include "core/common/strings.h"

extern char** environ;

namespace grpo::rollout {

namespace {

constexpr size_t kStderrTail = 2048;           // bytes of the program's stderr kept for messages
constexpr size_t kStderrPerDrain = 256 * 1024;  // stderr bytes read per drain_stderr() call

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int remaining_ms(double deadline) {
  double left = deadline - now_s();
  return left <= 0 ? 0 : static_cast<int>(std::ceil(left * 1000.0));
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Blocks SIGPIPE on this thread while alive; on exit consumes a SIGPIPE our write raised (unless
// one was already pending before), so a write to a dead program yields EPIPE and nothing else.
class SigpipeGuard {
public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// "exited with status 1", "killed by signal 9", or "" while still running (does not reap).
std::string exit_description(pid_t pid) {
  siginfo_t si{};
  if (waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid != pid) return "";
  if (si.si_code == CLD_EXITED) return "exited with status " + std::to_string(si.si_status);
  return std::string("killed by signal ") + std::to_string(si.si_status) + " (" + strsignal(si.si_status) + ")";
}

}  // namespace

ExternalReward::ExternalReward(ExternalRewardOptions options) : options_(std::move(options)) {
  const std::string ctx = "reward \"" + options_.name + "\"";
  check(!trim(options_.command).empty(), ctx + ": field \"command\"", "must be a non-empty command line",
        "e.g. \"python3 my_reward.py\"");
  check(std::isfinite(options_.timeout_s) && options_.timeout_s > 0, ctx + ": field \"timeout_s\"",
        "must be a number > 0, got " + std::to_string(options_.timeout_s));
  check(options_.startup_timeout_s >= 0 && options_.shutdown_grace_s >= 0, ctx,
        "startup_timeout_s and shutdown_grace_s must be >= 0");
  if (options_.max_consecutive_failures < 1) options_.max_consecutive_failures = 1;
}

ExternalReward::~ExternalReward() {
  std::lock_guard lock(mutex_);
  stop(options_.shutdown_grace_s);
}

namespace {
nlohmann::json request_object(const RewardInput& in) {
  nlohmann::json j = in.metadata.is_object() ? in.metadata : nlohmann::json::object();
  j["prompt"] = in.prompt;
  j["completion"] = in.completion;
  j["answer"] = in.answer ? nlohmann::json(*in.answer) : nlohmann::json(nullptr);
  return j;
}
}  // namespace

std::string ExternalReward::request_line(const RewardInput& in) {
  // Completions may end mid-character: replace invalid UTF-8 rather than throw.
  return request_object(in).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ExternalReward::batch_request_line(const std::vector<RewardInput>& batch) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& in : batch) samples.push_back(request_object(in));
  return nlohmann::json{{"batch", std::move(samples)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// ---- scoring ----

void ExternalReward::set_event_sink(RewardEventSink sink) {
  std::lock_guard lock(mutex_);
  sink_ = std::move(sink);
}

std::vector<std::optional<double>> ExternalReward::score_batch(const std::vector<RewardInput>& batch) {
  std::vector<std::optional<double>> out(batch.size());
  if (batch.empty()) return out;
  if (pid_ > 0 && !exit_description(pid_).empty()) {
    log_info("reward \"" + options_.name + "\": program " + exit_description(pid_) + "; restarting it");
    stop(0);
  }
  std::optional<Failure> failure;
  try {
    if (pid_ < 0) start();
    out = exchange_batch(batch, failure);
  } catch (const Error& e) {
    failure = Failure{FailureKind::Crash, e.what()};
  }
  if (!failure) {
    report(std::nullopt, "");
    return out;
  }
  failures_ += static_cast<int>(batch.size());
  out.assign(batch.size(), std::nullopt);
  drain_stderr();
  std::string tail = stderr_tail();
  log_warn("reward \"" + options_.name + "\" (" + options_.command + "): batch of " + std::to_string(batch.size()) +
           " unscorable: " + failure->cause + "; restarting the program" +
           (tail.empty() ? std::string() : "\n  stderr tail: " + tail));
  report(failure, tail);
  stop(0);
  return out;
}

std::vector<std::optional<double>> ExternalReward::exchange_batch(const std::vector<RewardInput>& batch,
                                                                  std::optional<Failure>& failure) {
  double deadline = now_s() + options_.timeout_s + (fresh_ ? options_.startup_timeout_s : 0.0);
  fresh_ = false;
  if (!check_unsolicited_output(failure)) return {};
  if (!write_all(batch_request_line(batch) + "\n", deadline, failure)) return {};
  std::optional<std::string> line = read_line(deadline, failure);
  if (!line) return {};
  if (framer_.has_pending_output()) {
    failure = Failure{FailureKind::Flood, "more than one line of output for one batch"};
    return {};
  }
  RewardBatchReply reply = parse_reward_batch_reply(*line, batch.size());
  if (!reply.ok) {
    failure = Failure{FailureKind::BadReply, reply.error};
    return {};
  }
  return std::move(reply.values);
}

std::vector<std::optional<double>> ExternalReward::score(const std::vector<RewardInput>& batch) {
  std::lock_guard lock(mutex_);
  if (options_.batch) return score_batch(batch);
  std::vector<std::optional<double>> out(batch.size());
  int consecutive = 0;
  size_t skipped = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (consecutive >= options_.max_consecutive_failures) {
      ++skipped;
      continue;
    }
    if (pid_ > 0 && !exit_description(pid_).empty()) {  // it exited between samples: restart quietly
      log_info("reward \"" + options_.name + "\": program " + exit_description(pid_) + "; restarting it");
      stop(0);
    }
    std::optional<Failure> failure;
    try {
      if (pid_ < 0) start();
      out[i] = exchange(batch[i], options_.timeout_s, failure);
    } catch (const Error& e) {
      failure = Failure{FailureKind::Crash, e.what()};
    }
    if (!failure) {
      consecutive = 0;
      report(std::nullopt, "");
      continue;
    }
    ++failures_;
    ++consecutive;
    out[i] = std::nullopt;
    drain_stderr();
    std::string tail = stderr_tail();
    log_warn("reward \"" + options_.name + "\" (" + options_.command + "): sample " + std::to_string(i) +
             " unscorable: " + failure->cause + "; restarting the program" +
             (tail.empty() ? std::string() : "\n  stderr tail: " + tail));
    report(failure, tail);
    stop(0);
  }
  if (skipped)
    log_warn("reward \"" + options_.name + "\": " + std::to_string(skipped) + " samples left unscored after " +
             std::to_string(consecutive) + " failures in a row (hint: run `" + options_.command +
             "` by hand and send it one JSON line)");
  return out;
}

void ExternalReward::report(const std::optional<Failure>& failure, const std::string& tail) {
  const std::string who = "reward \"" + options_.name + "\" (`" + options_.command + "`)";
  auto emit = [&](nlohmann::json e) {
    if (!sink_) return;
    e["reward"] = options_.name;
    try {
      sink_(e);
    } catch (const std::exception& ex) {  // reporting must never break scoring
      log_warn(who + ": event not reported: " + ex.what());
    }
  };
  auto clear = [&](const std::string& why) {
    emit({{"event", open_fault_ + "_cleared"}, {"message", who + ": " + why}, {"failures", fault_failures_}});
    open_fault_.clear();
    fault_failures_ = 0;
  };
  if (!failure) {
    if (!open_fault_.empty()) clear("scores samples again after " + std::to_string(fault_failures_) + " failed");
    return;
  }
  std::string kind, advice;
  switch (failure->kind) {
    case FailureKind::Timeout:
      kind = "reward_timeout";
      advice = "make the program answer each input line within timeout_s (now " + seconds(options_.timeout_s) +
               ") or raise timeout_s in its reward spec; meanwhile its samples count as unscorable";
      break;
    case FailureKind::Crash:
      kind = "reward_crashed";
      advice = "run `" + options_.command + "` by hand, send it one JSON line and fix the error it prints; "
               "it is restarted for every failed sample";
      break;
    case FailureKind::Flood:
      kind = "reward_output_flood";
      advice = "make the program print exactly one line {\"reward\": ...} (under 1 MiB) per input line and "
               "write logs to stderr, not stdout";
      break;
    case FailureKind::BadReply:
      kind = "reward_bad_reply";
      advice = "make the program print one JSON object per input line, {\"reward\": <number or null>}, and "
               "write logs to stderr, not stdout";
      break;
  }
  if (kind == open_fault_) {
    ++fault_failures_;
    return;
  }
  if (!open_fault_.empty()) clear("now fails differently (" + kind + ")");
  open_fault_ = kind;
  fault_failures_ = 1;
  nlohmann::json e = {{"event", kind}, {"severity", "warning"},
                      {"message", who + ": " + failure->cause +
                                      "; the sample is unscorable (advantage 0) and the program was restarted"},
                      {"advice", advice}, {"command", options_.command}};
  if (!tail.empty()) e["stderr_tail"] = tail;
  emit(std::move(e));
}

std::optional<double> ExternalReward::exchange(const RewardInput& in, double timeout_s,
                                               std::optional<Failure>& failure) {
  double deadline = now_s() + timeout_s + (fresh_ ? options_.startup_timeout_s : 0.0);
  fresh_ = false;
  if (!check_unsolicited_output(failure)) return std::nullopt;
  if (!write_all(request_line(in) + "\n", deadline, failure)) return std::nullopt;
  std::optional<std::string> line = read_line(deadline, failure);
  if (!line) return std::nullopt;
  if (framer_.has_pending_output()) {  // a second line now would be read as the next sample's reply
    failure = Failure{FailureKind::Flood, "more than one line of output for one sample"};
    return std::nullopt;
  }
  const RewardReply reply = parse_reward_reply(*line);
  switch (reply.kind) {
    case RewardReply::Kind::Reward: return reply.value;
    case RewardReply::Kind::Null: return std::nullopt;  // the program says: unscorable
    case RewardReply::Kind::Garbage: failure = Failure{FailureKind::BadReply, reply.error}; break;
  }
  return std::nullopt;
}

// ---- pipes ----

bool ExternalReward::write_all(const std::string& data, double deadline, std::optional<Failure>& failure) {
  SigpipeGuard guard;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(in_fd_, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EPIPE) {
      std::string how = exit_description(pid_);
      failure = Failure{FailureKind::Crash,
                        "the program stopped reading its input" + (how.empty() ? std::string() : " (" + how + ")")};
      return false;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      failure = Failure{FailureKind::Crash, std::string("writing to the program failed: ") + std::strerror(errno)};
      return false;
    }
    pollfd fds[2] = {{in_fd_, POLLOUT, 0}, {err_fd_, POLLIN, 0}};
    int ms = remaining_ms(deadline);
    if (ms == 0) {
      failure = Failure{FailureKind::Timeout,
                        "timed out after " + seconds(options_.timeout_s) + " while sending the sample"};
      return false;
    }
    if (::poll(fds, 2, ms) < 0 && errno != EINTR) {
      failure = Failure{FailureKind::Crash, std::string("poll failed: ") + std::strerror(errno)};
      return false;
    }
    if (fds[1].revents) drain_stderr();
  }
  return true;
}

bool ExternalReward::read_stdout_once(std::optional<Failure>& failure) {
  char buf[65536];
  ssize_t n = ::read(out_fd_, buf, sizeof buf);
  if (n > 0) {
    if (framer_.append(std::string_view(buf, static_cast<size_t>(n)))) return true;
    failure = Failure{FailureKind::Flood, framer_.flood()};
    return false;
  }
  if (n == 0) {  // EOF: the program closed stdout or died
    for (int i = 0; i < 20 && exit_description(pid_).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::string how = exit_description(pid_);
    failure = Failure{FailureKind::Crash,
                      "the program crashed or closed its output" + (how.empty() ? std::string() : " (" + how + ")")};
    return false;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
  failure = Failure{FailureKind::Crash, std::string("reading from the program failed: ") + std::strerror(errno)};
  return false;
}

bool ExternalReward::check_unsolicited_output(std::optional<Failure>& failure) {
  framer_.next_request();
  for (;;) {  // bounded: the framer refuses more than kMaxReplyBytes
    pollfd fd = {out_fd_, POLLIN, 0};
    if (::poll(&fd, 1, 0) <= 0 || !fd.revents) break;
    if (!read_stdout_once(failure)) return false;
  }
  if (framer_.has_pending_output()) {
    failure = Failure{FailureKind::Flood, "output no sample asked for (more than one line for an earlier sample)"};
    return false;
  }
  framer_.clear();  // blank lines only
  return true;
}

std::optional<std::string> ExternalReward::read_line(double deadline, std::optional<Failure>& failure) {
  for (;;) {
    if (auto line = framer_.next_line()) return line;
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    int ms = remaining_ms(deadline);
    if (ms == 0) {
      failure = Failure{FailureKind::Timeout, "timed out: no reply within " + seconds(options_.timeout_s)};
      return std::nullopt;
    }
    int rc = ::poll(fds, 2, ms);
    if (rc < 0 && errno != EINTR) {
      failure = Failure{FailureKind::Crash, std::string("poll failed: ") + std::strerror(errno)};
      return std::nullopt;
    }
    if (fds[1].revents) drain_stderr();
    if (rc <= 0 || !fds[0].revents) continue;
    if (!read_stdout_once(failure)) return std::nullopt;
  }
}

void ExternalReward::drain_stderr() {
  if (err_fd_ < 0) return;
  char buf[4096];
  // Bounded per call: a program that writes stderr without pause must not keep us here.
  for (size_t total = 0; total < kStderrPerDrain;) {
    ssize_t n = ::read(err_fd_, buf, sizeof buf);
    if (n > 0) {
      total += static_cast<size_t>(n);
      err_tail_.append(buf, static_cast<size_t>(n));
      if (err_tail_.size() > kStderrTail) err_tail_.erase(0, err_tail_.size() - kStderrTail);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) close_fd(err_fd_);  // the program closed stderr; poll() ignores fd -1
    return;
  }
}

std::string ExternalReward::stderr_tail() const { return trim(err_tail_); }

// ---- process lifetime ----

void ExternalReward::start() {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) throw Error("reward \"" + options_.name + "\"", std::string("pipe: ") + std::strerror(errno));
  if (pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    throw Error("reward \"" + options_.name + "\"", std::string("pipe: ") + std::strerror(errno));
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
    throw Error("reward \"" + options_.name + "\"", std::string("pipe: ") + std::strerror(errno));
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);  // own process group: SIGKILL reaches its children too
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);

  // The environment plus PYTHONUNBUFFERED=1, so Python scripts flush each reply line.
  std::vector<std::string> env_storage = {"PYTHONUNBUFFERED=1"};
  for (char** e = environ; e && *e; ++e)
    if (!starts_with(*e, "PYTHONUNBUFFERED=")) env_storage.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", command = options_.command;
  char* argv[] = {sh.data(), dash_c.data(), command.data(), nullptr};

  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]), ::close(out[1]), ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]), ::close(out[0]), ::close(err[0]);
    throw Error("reward \"" + options_.name + "\"", "cannot start `" + options_.command + "`: " + std::strerror(rc));
  }
  pid_ = pid;
  in_fd_ = in[1];
  out_fd_ = out[0];
  err_fd_ = err[0];
  for (int fd : {in_fd_, out_fd_, err_fd_}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  framer_.clear();
  err_tail_.clear();
  fresh_ = true;
  ++starts_;
}

void ExternalReward::stop(double grace_s) {
  if (pid_ < 0) return;
  close_fd(in_fd_);  // EOF on its stdin: a well-behaved program exits now
  double deadline = now_s() + grace_s;
  while (exit_description(pid_).empty() && now_s() < deadline) {
    drain_stderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Kill the whole group (the shell's children too) before reaping, so the id is not reused.
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  close_fd(out_fd_);
  close_fd(err_fd_);
  pid_ = -1;
  framer_.clear();
  fresh_ = false;
}

}  // namespace grpo::rollout
