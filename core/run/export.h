// Export of a run's adapter in Hugging Face formats: a PEFT adapter folder (adapter_config.json,
// adapter_model.safetensors, README.md model card) or a merged full model (config.json, sharded
// safetensors with model.safetensors.index.json, tokenizer and generation config copied).
// Torch-free header: the desktop app calls export_run() from its Adapters page.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace grpo::run {

struct ExportOptions {
  std::string run_dir;                      // the run directory (config.json, adapters/, checkpoints/)
  std::optional<int64_t> version;           // adapters/policy-v<N>; newest when neither is set
  std::optional<int64_t> checkpoint_step;   // checkpoints/step-<S> instead of a published version
  std::string source_dir;                   // export this adapter folder instead: a copy of one of the
                                            // run's (the Hub pusher's), named for the model card by
                                            // version or checkpoint_step (neither: the final adapter/)
  std::string out_dir;                      // created; must be empty or absent
  bool merged = false;                      // full model with the adapter folded in
  std::string dtype = "f32";                // f32 | bf16 | f16 (tensor dtype of the written files)
  int64_t max_shard_bytes = 5LL << 30;      // merged: a shard is closed before it passes this size
  std::string base_model_name;              // base_model_name_or_path to write (e.g. a Hub id);
                                            // default: the run's model_name_or_path
};

struct ExportResult {
  std::string out_dir;
  std::vector<std::string> files;           // names relative to out_dir, in write order
};

ExportResult export_run(const ExportOptions& o);   // throws grpo::Error

// The reasons vLLM's LoRA loader (vllm/lora/peft_helper.py; docs/formats.md, "What vLLM would
// refuse") would refuse the PEFT adapter in `dir`: missing r/lora_alpha/target_modules, bias other
// than "none", modules_to_save, DoRA, lora_bias, aLoRA, layer_replication, a non-default
// init_lora_weights, a rank above 512, tensors other than lora_A/lora_B weights, embeddings or
// lm_head, a dtype other than F32/BF16/F16. Empty = acceptable.
std::vector<std::string> vllm_adapter_problems(const std::string& dir);
// vllm_max_lora_rank (the --max-lora-rank that serves a rank) is in core/records/model_card.h.

}  // namespace grpo::run
