#include "core/common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace grpo {
namespace {
LogLevel initial_level() {
  const char* env = std::getenv("GRPO_LOG_LEVEL");
  if (!env) return LogLevel::Info;
  if (!std::strcmp(env, "debug")) return LogLevel::Debug;
  if (!std::strcmp(env, "warn")) return LogLevel::Warn;
  if (!std::strcmp(env, "error")) return LogLevel::Error;
  return LogLevel::Info;
}
std::atomic<int> g_level{static_cast<int>(initial_level())};
std::mutex g_mutex;
}  // namespace

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }

void log(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level.load()) return;
  static const char* names[] = {"debug", "info", "warning", "error"};
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "[%s] %s\n", names[static_cast<int>(level)], message.c_str());
}

}  // namespace grpo
