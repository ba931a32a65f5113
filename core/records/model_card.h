// README.md model cards for exported adapters and merged models, in the Hugging Face Hub's
// format: YAML front matter (base_model, library_name, pipeline_tag, base_model_relation, tags, the
// Hub dataset trained on, the final eval accuracy as a model-index result) and a body saying what
// was trained, on which task and rewards, for how many steps, how it ended (final reward, eval
// accuracy, read from the run's metrics file), how to load it, and the exact run config.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::run {

// The smallest value vLLM allows for --max-lora-rank (1, 8, 16, 32, 64, 128, 256, 320, 512)
// that serves rank r; 0 when r > 512.
int64_t vllm_max_lora_rank(int64_t r);

// What the run's metrics say about it up to a point (a published version or a checkpoint step).
struct MetricsSummary {
  int64_t steps = 0;                       // the last step counted
  std::optional<double> final_reward;      // "reward" of the last step
  std::optional<double> mean_reward_last;  // mean "reward" over the last mean_reward_steps steps
  int64_t mean_reward_steps = 0;           // up to 10
  std::optional<double> first_reward;      // "reward" of the first step
  std::optional<double> final_eval_accuracy, best_eval_accuracy;
  int64_t best_eval_step = 0;
};

// Reads the run's metrics file (RunFolder; absent = empty summary), counting records with
// step <= max_step and policy_version <= max_version when those are given. Malformed whole lines
// are an error naming the line; a torn last line (a run still writing) is not read.
MetricsSummary summarize_metrics(const std::string& run_dir, std::optional<int64_t> max_step = std::nullopt,
                                 std::optional<int64_t> max_version = std::nullopt);

struct ModelCardInput {
  bool merged = false;               // library_name transformers (merged) or peft (adapter)
  std::string base_model;            // base_model_name_or_path as written in the export
  std::string source;                // e.g. "policy-v3 of run runs/demo"
  std::string dtype;                 // F32 | BF16 | F16
  nlohmann::json run_config;         // the run's config.json (written verbatim into the card)
  MetricsSummary metrics;
  std::string version;               // grpo version that wrote it ("" = not stated)
};

std::string model_card(const ModelCardInput& in);

// "a b" -> "\"a b\"": a YAML double-quoted scalar (JSON string syntax is valid YAML).
std::string yaml_quote(const std::string& s);

}  // namespace grpo::run
