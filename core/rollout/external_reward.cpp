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

constexpr size_t kStderrTail = 2048;          // bytes of the program's stderr kept for messages
constexpr size_t kMaxLine = 16 * 1024 * 1024;  // a reply longer than this is garbage

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

std::string ExternalReward::request_line(const RewardInput& in) {
  nlohmann::json j = in.metadata.is_object() ? in.metadata : nlohmann::json::object();
  j["prompt"] = in.prompt;
  j["completion"] = in.completion;
  j["answer"] = in.answer ? nlohmann::json(*in.answer) : nlohmann::json(nullptr);
  // Completions may end mid-character: replace invalid UTF-8 rather than throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// ---- scoring ----

std::vector<std::optional<double>> ExternalReward::score(const std::vector<RewardInput>& batch) {
  std::lock_guard lock(mutex_);
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
      failure = Failure{e.what()};
    }
    if (!failure) {
      consecutive = 0;
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
    stop(0);
  }
  if (skipped)
    log_warn("reward \"" + options_.name + "\": " + std::to_string(skipped) + " samples left unscored after " +
             std::to_string(consecutive) + " failures in a row (hint: run `" + options_.command +
             "` by hand and send it one JSON line)");
  return out;
}

std::optional<double> ExternalReward::exchange(const RewardInput& in, double timeout_s,
                                               std::optional<Failure>& failure) {
  double deadline = now_s() + timeout_s + (fresh_ ? options_.startup_timeout_s : 0.0);
  fresh_ = false;
  std::string cause;
  if (!write_all(request_line(in) + "\n", deadline, cause)) {
    failure = Failure{cause};
    return std::nullopt;
  }
  std::optional<std::string> line;
  do {  // blank lines are ignored
    line = read_line(deadline, cause);
    if (!line) {
      failure = Failure{cause};
      return std::nullopt;
    }
  } while (trim(*line).empty());

  auto reply = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
  std::string shown = line->size() > 200 ? line->substr(0, 200) + "..." : *line;
  if (reply.is_discarded() || !reply.is_object()) {
    failure = Failure{"garbage output (not a JSON object): " + shown};
  } else if (!reply.contains("reward")) {
    failure = Failure{"garbage output (no \"reward\" key): " + shown};
  } else if (const auto& r = reply["reward"]; r.is_null()) {
    return std::nullopt;  // the program says: unscorable
  } else if (r.is_number() && std::isfinite(r.get<double>())) {
    return r.get<double>();
  } else {
    failure = Failure{std::string("garbage output (\"reward\" is ") + r.type_name() +
                      ", expected a number or null): " + shown};
  }
  return std::nullopt;
}

// ---- pipes ----

bool ExternalReward::write_all(const std::string& data, double deadline, std::string& cause) {
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
      cause = "the program stopped reading its input" + (how.empty() ? std::string() : " (" + how + ")");
      return false;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      cause = std::string("writing to the program failed: ") + std::strerror(errno);
      return false;
    }
    pollfd fds[2] = {{in_fd_, POLLOUT, 0}, {err_fd_, POLLIN, 0}};
    int ms = remaining_ms(deadline);
    if (ms == 0) {
      cause = "timed out after " + seconds(options_.timeout_s) + " while sending the sample";
      return false;
    }
    if (::poll(fds, 2, ms) < 0 && errno != EINTR) {
      cause = std::string("poll failed: ") + std::strerror(errno);
      return false;
    }
    if (fds[1].revents) drain_stderr();
  }
  return true;
}

std::optional<std::string> ExternalReward::read_line(double deadline, std::string& cause) {
  for (;;) {
    size_t nl = out_buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = out_buffer_.substr(0, nl);
      out_buffer_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return line;
    }
    if (out_buffer_.size() > kMaxLine) {
      cause = "garbage output (a line longer than 16 MiB)";
      return std::nullopt;
    }
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    int ms = remaining_ms(deadline);
    if (ms == 0) {
      cause = "timed out: no reply within " + seconds(options_.timeout_s);
      return std::nullopt;
    }
    int rc = ::poll(fds, 2, ms);
    if (rc < 0 && errno != EINTR) {
      cause = std::string("poll failed: ") + std::strerror(errno);
      return std::nullopt;
    }
    if (fds[1].revents) drain_stderr();
    if (rc <= 0 || !fds[0].revents) continue;
    char buf[65536];
    ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n > 0) {
      out_buffer_.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {  // EOF: the program closed stdout or died
      for (int i = 0; i < 20 && exit_description(pid_).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::string how = exit_description(pid_);
      cause = "the program crashed or closed its output" + (how.empty() ? std::string() : " (" + how + ")");
      return std::nullopt;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      cause = std::string("reading from the program failed: ") + std::strerror(errno);
      return std::nullopt;
    }
  }
}

void ExternalReward::drain_stderr() {
  if (err_fd_ < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(err_fd_, buf, sizeof buf);
    if (n > 0) {
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
  out_buffer_.clear();
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
  out_buffer_.clear();
  fresh_ = false;
}

}  // namespace grpo::rollout
