// Engine value types: plain structs copied across threads (engine thread -> GUI, CLI). No torch,
// no Qt, no pointers into the engine.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace grpo::run {

// One optimizer step's report: metrics with TRL names (already window-reduced).
struct StepReport {
  int64_t step = 0;
  int64_t max_steps = 0;
  double elapsed_s = 0;
  int64_t policy_version = 0;
  std::map<std::string, double> metrics;
  std::string verdict;  // "trainer-bound" | "generation-bound" | "balanced" (async engine)
  std::string advice;   // what the user should act on
};

enum class EngineState { Idle, Running, Paused, Stopping, Finished, Failed };
const char* to_string(EngineState s);

}  // namespace grpo::run
