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

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run/policy.h"
#include "core/run/sft_config.h"

namespace grpo::run {

// SftConfig, its key table and load_sft_config: core/run/sft_config.h.

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
  double eval_accuracy = NAN; // arith greedy accuracy when evaluated this step, else NaN
};

struct SftResult {
  std::string output_dir;
  std::string format;               // "checkpoint" | "adapter"
  std::vector<double> losses;       // every step's loss
  int64_t steps = 0;
  int64_t train_examples = 0;
  double eval_accuracy = NAN;       // final arith accuracy, when evaluated (else NaN)
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
