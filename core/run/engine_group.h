// Engine internals shared by engine.cpp (trainer, control, checkpoints) and engine_pipeline.cpp
// (producers, scorer, the trainer's intake): a prompt's group on its way through the pipeline.
// Not part of the engine's interface; include only from those two files.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/rollout/dataset.h"
#include "core/run/engine.h"
#include "core/run/rollout_source.h"

namespace grpo::run {

using Clock = std::chrono::steady_clock;

// One prompt's group: generated, scored, queued, trained (or dropped as too stale).
struct Engine::Group {
  int64_t group_id = 0;
  rollout::Example example;
  std::vector<int64_t> prompt_ids;
  RolloutResult result;
  Clock::time_point created, generated, enqueued;
  std::vector<std::string> texts;
  std::vector<double> rewards, advantages;
  std::vector<std::vector<double>> per_function;  // [F][G]
  std::vector<std::string> function_names;
};

}  // namespace grpo::run
