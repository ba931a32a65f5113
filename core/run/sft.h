// Supervised fine-tuning (`grpo sft`) and random initialisation of checkpoints (`grpo init-model`).
//
// SFT trains a Hugging Face model, with a LoRA adapter or in full, on prompt/completion pairs:
// JSONL rows {"prompt": ..., "completion": ...} (prompt a string or a chat conversation, or a
// "messages" conversation; completion a string or [{"role": "assistant", "content": ...}]), or
// the built-in arithmetic task (completion = the answer). Prompts are encoded as the GRPO loop
// encodes them (Policy::encode_prompt: the chat template when the model has one); the
// completion is followed by the end-of-turn token (<|im_end|> / <|eot_id|>, else EOS). The loss
// is the mean cross-entropy over completion tokens only; each step's examples are packed into
// padding-free rows of at most token_budget tokens (seq_ids), gradients accumulate over the
// rows, and grpo::Optimizer (AdamW with the LR schedules) steps. The result is a full HF
// checkpoint (config.json, model.safetensors, tokenizer and generation files) or a PEFT adapter.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run/policy.h"

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

  // Applies every key of `j` over the current values; throws grpo::Error naming `source`, the
  // key, the value and what is allowed (with the nearest known key for an unknown one).
  void apply(const nlohmann::json& j, const std::string& source);
  void validate(const std::string& source) const;  // cross-field checks
  nlohmann::json to_json() const;
  // "checkpoint" or "adapter" after resolving "auto".
  std::string resolved_save_format() const;
};

std::vector<std::string> sft_config_keys();
// load_config_file (JSON or YAML) + apply + validate.
SftConfig load_sft_config(const std::string& path);

// One training pair as token ids.
struct SftSample {
  std::vector<int64_t> prompt_ids;
  std::vector<int64_t> completion_ids;  // ends with the end-of-turn token when there is one
};

struct SftLog {
  int64_t step = 0;
  int64_t max_steps = 0;
  double loss = 0;           // mean completion-token cross-entropy of this step
  double learning_rate = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;   // forwarded tokens per second over the step
  double elapsed_s = 0;
  double epoch = 0;          // fractional passes over the data
  double eval_accuracy = -1; // arith greedy accuracy when evaluated this step, else -1
};

struct SftResult {
  std::string output_dir;
  std::string format;               // "checkpoint" | "adapter"
  std::vector<double> losses;       // every step's loss
  int64_t steps = 0;
  int64_t train_examples = 0;
  double eval_accuracy = -1;        // final arith accuracy, when evaluated
  double elapsed_s = 0;
};

// Trains an already loaded policy in memory (its adapter when it has one, else every base weight;
// the caller attaches the adapter or makes the base trainable). Saves nothing.
SftResult train_sft(Policy& policy, const SftConfig& cfg, const std::function<void(const SftLog&)>& on_log = {});

// Runs SFT end to end: loads the model and data, trains, writes the output. `on_log` is called
// every logging_steps, at eval steps, and at the last step.
SftResult run_sft(const SftConfig& cfg, const std::function<void(const SftLog&)>& on_log = {});

// Copies the tokenizer files (tokenizer.json, tokenizer_config.json, special_tokens_map.json,
// generation_config.json; whichever exist) from `src_dir` to `dst_dir`. Returns how many.
int copy_tokenizer_files(const std::string& src_dir, const std::string& dst_dir);

// `grpo init-model`: a randomly initialised checkpoint for `config_json` (a Hugging Face
// config.json: llama | qwen2 | qwen3) with HF's init (N(0, initializer_range), seeded), stored
// in `dtype` ("float32" | "bfloat16" | "float16"), with the tokenizer files of `tokenizer_dir`
// copied in (generation_config.json written from the config's ids when the tokenizer has none).
// Throws when the tokenizer's vocabulary does not fit the config's vocab_size.
struct InitModelResult {
  int64_t parameters = 0;
  int64_t vocab_size = 0;
  int64_t tokenizer_vocab = 0;
};
InitModelResult init_model(const std::string& config_json, const std::string& tokenizer_dir,
                           const std::string& output_dir, uint64_t seed = 0,
                           const std::string& dtype = "float32");

}  // namespace grpo::run
