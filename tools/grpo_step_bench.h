// `grpo bench grpo-step`: one GRPO optimizer step (forward + backward over a ragged batch, any of
// TRL's loss types, AdamW on the LoRA parameters) with our GrpoTrainer, against the same step written in
// Python with PyTorch eager as TRL's GRPOTrainer runs it (tests/bench/grpo_step_baseline.py:
// padded micro-batches of per_device_train_batch_size, full logits, selective_log_softmax,
// torch.optim.AdamW), on the same model, adapter and batch, in the same run.
//
// The C++ side writes the base model (save_pretrained, F32 safetensors), the adapter (PEFT
// layout; lora_B is drawn N(0, 0.02) instead of zeros so every factor gets a gradient) and the
// batch (prompt ids, completion ids, behaviour log-probs, advantages, config) to a temporary
// folder, runs `<python> <script> <folder>` and reads the last JSON line it prints.
//
// Loss types that normalise each micro-batch on its own (grpo, bnpo, dr_grpo, sapo, luspo) give
// the same loss only over the same micro-batches, so for them our side trains on the baseline's
// fixed-count micro-batches (token_budget 0, per_device_train_batch_size); dapo, cispo and vespo
// divide by the whole step's tokens and keep our packed rows. The Python side takes its loss from
// tests/grpo/loss_reference.py, the reference the loss tests compare grpo_loss with.
//
// Correctness in the same run: the first step's loss and pre-clipping grad_norm of both sides
// must agree (loss to loss_rtol relative, grad_norm to 10x that), as must the loss of every later
// step (which checks the AdamW updates too); otherwise grpo::Error is thrown with the figures.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace grpo::grpo {

struct GrpoStepBenchOptions {
  std::string model_dir;       // a checkpoint; empty = generate `size` (random init)
  std::string size = "25m";    // "tiny" | "25m" | "100m" (model::bench_model_config)
  int64_t prompts = 8;
  int64_t group = 8;           // G: samples per prompt
  int64_t prompt_min = 64, prompt_max = 128;        // prompt lengths (tokens)
  int64_t completion_min = 32, completion_max = 256;  // ragged completion lengths
  int64_t token_budget = 4096;  // ours: packed rows; 0 = per_device_train_batch_size rows
  std::string row_layout = "auto";  // ours: "auto" | "segments" | "separate" | "padded" (GrpoTrainer RowLayout)
  bool share_prompts = true;   // ours: a group's completions share one forward of its prompt (TrainConfig)
  int64_t per_device_train_batch_size = 8;  // the Python (TRL) micro-batch size
  int64_t lora_r = 16;
  double lora_alpha = 32;
  double learning_rate = 1e-5;
  double epsilon = 0.2, epsilon_high = 0.28;
  std::string loss_type = "dapo";           // any of TRL's (kLossTypes)
  std::string importance_sampling_level;    // "" = token, or sequence for luspo (TRL's advice)
  double delta = 0;                         // > 0: two-sided clipping
  double temperature = 0.9;
  int threads = 0;             // intra-op threads for both sides; 0 = LibTorch's default
  std::string device = "cpu";  // "cpu" | "cuda": both sides, fp32 (TF32 off), so they stay comparable
  int iters = 3;               // timed steps (median) after one checked warm-up step
  std::string python = "/usr/bin/python3";
  std::string script = "tests/bench/grpo_step_baseline.py";
  double loss_rtol = 1e-4;
  bool keep_files = false;     // leave the temporary folder (its path is reported)
  std::string trace;           // non-empty: LibTorch's profiler trace of our last timed step (chrome://tracing JSON)
};

// Keys: tok_s, python_tok_s, speedup, step_s, python_step_s, loss, python_loss, loss_abs_diff,
// loss_rel_diff, grad_norm, python_grad_norm, losses, python_losses, samples, tokens (real
// prompt+completion tokens per step), completion_tokens, python_padded_tokens, rows, loss_type,
// importance_sampling_level, token_budget (ours, 0 when the loss type needs fixed-count micro-batches),
// row_layout, forward_calls and segmented_rows (ours, per step), share_prompts, forwarded_tokens and shared_prompt_tokens
// (ours, per step: the prompt copies the shared layout does not forward), model,
// params, lora_params, threads, torch_version (Python's).
nlohmann::json bench_grpo_step(const GrpoStepBenchOptions& options);

}  // namespace grpo::grpo
