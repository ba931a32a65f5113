// Shared helpers for the engine tests: a small, fast run config on the embedded demo model, and
// readers for a run directory's JSONL files.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/grpo/config.h"

namespace engine_test {

inline grpo::grpo::TrainConfig tiny_config(const std::string& run_dir) {
  grpo::grpo::TrainConfig c;
  c.apply({{"model_name_or_path", std::string(GRPO_RESOURCES) + "/models/tiny-arith"},
           {"task", "arith"}, {"task_difficulty", 1}, {"seed", 7},
           {"num_generations", 4}, {"prompts_per_step", 2}, {"max_completion_length", 4},
           {"max_prompt_length", 48}, {"learning_rate", 1e-3}, {"r", 4}, {"lora_alpha", 8},
           {"per_device_train_batch_size", 8}, {"max_steps", 6}, {"eval_steps", 0}, {"eval_size", 8},
           {"save_steps", 2}, {"queue_maxsize", 32}, {"max_staleness", 2}},
          "test");
  c.output_dir = run_dir;
  return c;
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  if (!grpo::file_exists(path)) return out;
  for (const auto& line : grpo::split(grpo::read_file(path), '\n'))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

inline std::vector<nlohmann::json> events_named(const std::string& run_dir, const std::string& name) {
  std::vector<nlohmann::json> out;
  for (auto& e : read_jsonl(run_dir + "/events.jsonl"))
    if (e.value("event", "") == name) out.push_back(e);
  return out;
}

}  // namespace engine_test
