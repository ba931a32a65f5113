// Clocks the engine measures with: seconds since a steady-clock instant (durations), and wall
// time in seconds since the epoch (the "time" field of metrics and events).
#pragma once

#include <chrono>

namespace grpo {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

inline double wall_time_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace grpo
