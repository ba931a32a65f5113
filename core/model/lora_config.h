// LoraConfig: the LoRA hyperparameters we support (PEFT's names: r, lora_alpha, lora_dropout,
// target_modules, use_rslora) and the projection names they may target. Parsing and writing
// adapter_config.json lives in peft_io.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace grpo::model {

// The seven linear projections of a Llama/Qwen decoder layer, in module order.
const std::vector<std::string>& projection_names();

struct LoraConfig {
  int64_t r = 8;
  double lora_alpha = 8.0;
  double lora_dropout = 0.0;
  // "all-linear" (every projection; never lm_head, as in PEFT) or a list of projection names.
  std::vector<std::string> target_modules = {"all-linear"};
  bool use_rslora = false;

  // alpha / r, or alpha / sqrt(r) with use_rslora.
  double scaling() const;
  // True when the projection named `module` (e.g. "q_proj") gets an adapter.
  bool targets(const std::string& module) const;
  // The targeted projection names, sorted (how adapter_config.json stores them).
  std::vector<std::string> resolved_targets() const;
  // Throws grpo::Error naming `context` for r <= 0, dropout outside [0,1), unknown modules.
  void validate(const std::string& context) const;
};

}  // namespace grpo::model
