// PEFT LoRA adapters on disk (reference/facts.md §3): adapter_config.json (the classic key set,
// sorted, indent 2) and adapter_model.safetensors with keys
// base_model.model.model.layers.{L}.self_attn.q_proj.lora_A.weight (no adapter-name segment),
// F32 tensors, metadata {"format": "pt"}. Both files are written atomically.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/model/causal_lm.h"
#include "core/model/lora_config.h"

namespace grpo::model {

inline constexpr const char* kAdapterConfigName = "adapter_config.json";
inline constexpr const char* kAdapterWeightsName = "adapter_model.safetensors";
inline constexpr const char* kPeftKeyPrefix = "base_model.model.";

// adapter_config.json content as PeftModel.save_pretrained writes it for a LoRA CAUSAL_LM.
nlohmann::json adapter_config_json(const LoraConfig& config, const std::string& base_model_name_or_path);
// Reads the fields we use; throws grpo::Error (naming `context` and the key) for unsupported
// features: use_dora, bias != "none", modules_to_save, LoRA on embeddings or lm_head, per-module
// rank/alpha patterns, layers_to_transform, a regex target_modules, peft_type != LORA.
LoraConfig lora_config_from_json(const nlohmann::json& j, const std::string& context);
LoraConfig read_adapter_config(const std::string& dir);

// Writes `dir`/adapter_config.json and `dir`/adapter_model.safetensors for the model's adapter
// (creates `dir`). base_model_name_or_path defaults to the model config's name_or_path.
void save_adapter(const CausalLMImpl& model, const std::string& dir,
                  const std::string& base_model_name_or_path = {});

// Attaches the adapter in `dir` to `model` (replacing any) and loads its weights. Names and
// shapes are checked against the base model; errors say what does not fit.
void load_adapter(CausalLMImpl& model, const std::string& dir);
// Copies the adapter weights in `dir` into the model's attached adapter in place: the parameter
// tensors keep their identity, so an optimizer holding them stays valid (checkpoint resume) and
// a generator swaps versions without reallocating. The configs must match.
void load_adapter_weights(CausalLMImpl& model, const std::string& dir);

}  // namespace grpo::model
