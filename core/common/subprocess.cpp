#include "core/common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/common/error.h"

extern char** environ;

namespace grpo {
namespace {

using Clock = std::chrono::steady_clock;

struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// The environment with `extra` added; an entry of `extra` replaces one of the same name.
std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& x : extra) replaced = replaced || x.substr(0, x.find('=')) == name;
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// Reads what is there from `fd` into `into` up to `cap` bytes (the rest is dropped); false at EOF.
bool drain(int fd, std::string& into, size_t cap, bool& truncated) {
  char buf[16384];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n == 0) return false;
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  const size_t room = into.size() < cap ? cap - into.size() : 0;
  into.append(buf, std::min(room, static_cast<size_t>(n)));
  truncated = truncated || static_cast<size_t>(n) > room;
  return true;
}

}  // namespace

std::string CommandResult::describe() const {
  if (timed_out) return "killed at its deadline";
  std::string what = signal ? "signal " + std::to_string(signal) : "exit " + std::to_string(exit_code);
  std::string last = err;
  while (!last.empty() && (last.back() == '\n' || last.back() == '\r')) last.pop_back();
  const size_t nl = last.rfind('\n');
  if (nl != std::string::npos) last = last.substr(nl + 1);
  if (last.size() > 500) last = last.substr(0, 500) + "...";
  return last.empty() ? what : what + ": " + last;
}

CommandResult run_command(const std::vector<std::string>& argv, const CommandLimits& limits) {
  check(!argv.empty() && !argv[0].empty(), "run_command", "no program given");
  const std::string& program = argv[0];
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw Error(program, std::string("pipe: ") + std::strerror(errno));
  Fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw Error(program, std::string("pipe: ") + std::strerror(errno));
  Fd err_r{err_pipe[0]}, err_w{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);  // its own process group: a timeout kills what it started too
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &defaults);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::vector<std::string> env = environment_with(limits.extra_env);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, program.c_str(), &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw Error(program, std::string("cannot run it: ") + std::strerror(rc),
                rc == ENOENT ? "is it installed, and on PATH?" : std::string());
  out_w.reset();
  err_w.reset();

  CommandResult r;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::max(0.0, limits.timeout_s)));
  bool out_open = true, err_open = true;
  while ((out_open || err_open) && !r.timed_out) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd fds[2] = {{out_open ? out_r.fd : -1, POLLIN, 0}, {err_open ? err_r.fd : -1, POLLIN, 0}};
    const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    if (fds[0].revents) out_open = drain(out_r.fd, r.out, limits.max_output_bytes, r.truncated);
    if (fds[1].revents) err_open = drain(err_r.fd, r.err, limits.max_output_bytes, r.truncated);
  }
  // Both pipes closed (or the deadline passed): reap it, within what is left of the deadline.
  auto kill_group = [pid] {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  };
  if (r.timed_out) kill_group();
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, r.timed_out ? 0 : WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      status = 0;
      break;
    }
    if (Clock::now() >= deadline) {  // it closed its pipes but lives on
      r.timed_out = true;
      kill_group();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (r.timed_out) ::kill(-pid, SIGKILL);  // what it left behind in its group
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  if (r.timed_out) r.exit_code = -1;
  return r;
}

}  // namespace grpo
