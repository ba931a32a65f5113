// The config of `grpo sft` (supervised fine-tuning, core/run/sft.h): the SftConfig struct and its
// key table (sft_config.cpp), built with the same machinery as TrainConfig's
// (core/grpo/config_table.h), so validation, `--set` and `--help-config` read one schema. No torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config_schema.h"

namespace grpo::run {

struct SftConfig {
  // model and data
  std::string model_name_or_path;
  std::string train_file;           // JSONL; or task = "arith"
  std::string task;                 // "" or "arith"
  int64_t task_difficulty = 2;      // arith: 1..5 (ArithOptions::difficulty)
  int64_t eval_size = 200;          // arith: held-out problems (the split `grpo train` uses)
  std::string output_dir;
  std::string save_format = "auto"; // "auto" (full -> checkpoint, lora -> adapter) | "checkpoint" | "adapter"
  std::string save_dtype = "float32";
  int64_t seed = 42;
  // what is trained
  bool use_lora = true;             // false: full fine-tuning of every base weight
  int64_t r = 8;
  double lora_alpha = 16;
  double lora_dropout = 0.0;
  nlohmann::json target_modules = "all-linear";
  bool use_rslora = false;
  // optimisation
  double learning_rate = 1e-4;
  std::string lr_scheduler_type = "cosine";
  double warmup_ratio = 0.0;
  int64_t max_steps = 100;          // optimizer steps; <= 0: num_train_epochs passes over the data
  int64_t num_train_epochs = 1;
  int64_t per_device_train_batch_size = 32;  // examples per optimizer step
  int64_t token_budget = 4096;      // tokens per packed row (one forward/backward)
  int64_t max_length = 512;         // prompt + completion tokens; longer examples are left-truncated
  double max_grad_norm = 1.0;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  // reporting
  int64_t logging_steps = 10;
  int64_t eval_steps = 0;           // arith: greedy accuracy every N steps (and at the end) when > 0

  // Applies every key of `j` over the current values (all or nothing); throws grpo::Error naming
  // `source`, the key, the value and what is allowed (with the nearest known key for an unknown one).
  void apply(const nlohmann::json& j, const std::string& source);
  void validate(const std::string& source) const;  // cross-field checks
  nlohmann::json to_json() const;
  // "checkpoint" or "adapter" after resolving "auto".
  std::string resolved_save_format() const;
};

// The key table of SftConfig (type, range, default, group, doc), one row per key of to_json().
const std::vector<grpo::ConfigKeyInfo>& sft_config_schema();
std::vector<std::string> sft_config_keys();
// load_config_file (JSON or YAML) + apply + validate.
SftConfig load_sft_config(const std::string& path);

}  // namespace grpo::run
