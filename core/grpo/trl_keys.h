// Configs people already have: the keys of TRL's GRPOConfig / AsyncGRPOConfig (and the
// TrainingArguments they extend), TRL's ModelConfig/ScriptArguments (lora_r, dataset_name, ...)
// and PEFT's LoraConfig, mapped onto TrainConfig. A key is either renamed (lora_r -> r), accepted
// and ignored with the reason it has no effect here (bf16, report_to, use_vllm, ...), accepted
// only at its neutral value (use_dora: false, use_qalora: false; anything else would change the
// maths and is an error), or converted (scale_rewards: true -> "group", max_steps: -1 -> unset).
// Keys that TRL does not know either stay in place, so TrainConfig::apply still rejects them
// with the nearest known key.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::grpo {

struct TrlNote {
  std::string key;
  nlohmann::json value;
  std::string note;  // why it is ignored, or what it became
};

struct TrlImport {
  nlohmann::json config = nlohmann::json::object();  // what TrainConfig::apply should see
  std::vector<TrlNote> ignored;                       // accepted without effect, with the reason
  std::vector<TrlNote> translated;                    // renamed or converted
};

// Translates the TRL/PEFT keys of `j` (an object). `is_own_key` says which names TrainConfig
// has: those pass through untouched (only TRL's "unset" values of them, like max_steps: -1, are
// dropped with a note). Throws grpo::Error naming `source` and the key for a TRL setting this engine cannot honour
// (e.g. use_dora: true, repetition_penalty: 1.2) or a key given under both its TRL and its own name
// with different values.
TrlImport translate_trl_config(const nlohmann::json& j, const std::string& source,
                               const std::function<bool(const std::string&)>& is_own_key);

// Every TRL/PEFT key the table knows (for --help-config style listings and tests).
std::vector<std::string> trl_known_keys();

}  // namespace grpo::grpo
