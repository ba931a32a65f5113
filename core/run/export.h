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
  std::string out_dir;                      // created; must be empty or absent
  bool merged = false;                      // full model with the adapter folded in
  std::string dtype = "f32";                // f32 | bf16 | f16 (tensor dtype of the written files)
  int64_t max_shard_bytes = 5LL << 30;      // merged: a shard is closed before it passes this size
};

struct ExportResult {
  std::string out_dir;
  std::vector<std::string> files;           // names relative to out_dir, in write order
};

ExportResult export_run(const ExportOptions& o);   // throws grpo::Error

}  // namespace grpo::run
