#include <QCoreApplication>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "app/commands.h"

namespace grpo::cli {

std::unique_ptr<QCoreApplication> make_qt_application() {
  if (QCoreApplication::instance()) return nullptr;
  static int qt_argc = 1;  // QCoreApplication keeps references to these for its lifetime
  static char qt_name[] = "grpo";
  static char* qt_argv[] = {qt_name, nullptr};
  return std::make_unique<QCoreApplication>(qt_argc, qt_argv);
}

namespace {
std::atomic<bool> g_stop_requested{false};
void on_stop_signal(int) { g_stop_requested = true; }
}  // namespace

void install_stop_signals() {
  g_stop_requested = false;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

void install_stop_signal(int signal) { std::signal(signal, on_stop_signal); }

void request_stop() { g_stop_requested = true; }

void wait_for_stop_signal() {
  while (!g_stop_requested) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace grpo::cli
