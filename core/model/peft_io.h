// PEFT LoRA adapters on disk (docs/formats.md, "PEFT adapter folder"): adapter_config.json (the
// classic key set, sorted, indent 2) and adapter_model.safetensors with keys
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
// PEFT's tensor name for a modules_to_save copy of `module` ("lm_head", "model.embed_tokens"):
// base_model.model.<module>.weight (get_peft_model_state_dict drops "modules_to_save.default").
inline std::string peft_saved_module_key(const std::string& module) { return kPeftKeyPrefix + module + ".weight"; }

// adapter_config.json content as PeftModel.save_pretrained writes it for a LoRA CAUSAL_LM.
// `fused`: the base has Phi-3's fused projections ("all-linear" is written out as its modules).
nlohmann::ordered_json adapter_config_json(const LoraConfig& config, const std::string& base_model_name_or_path,
                                           bool fused = false);
// The LoRA plan is written back whole (rank_pattern, alpha_pattern, layers_to_transform,
// layers_pattern, a regex target_modules), so PEFT rebuilds the same adapter from it; objects are
// in PEFT's key order (sorted, as save_pretrained's sort_keys=True), except inside rank_pattern and
// alpha_pattern, which keep the config's order (PEFT's first-match lookup depends on it).
//
// Reads the fields we use, with PEFT's semantics (lora_config.h): r, lora_alpha, lora_dropout,
// use_rslora, target_modules (a list, "all-linear", or any other string as a regex),
// rank_pattern / alpha_pattern (searched in file order: parse with nlohmann::ordered_json; the
// nlohmann::json overload sees them key-sorted), layers_to_transform, layers_pattern. Throws
// grpo::Error (naming `context`, the key and the reason, and listing what is refused) for the
// features not implemented: use_dora, bias != "none", lora_bias, modules_to_save,
// layer_replication, fan_in_fan_out, target_parameters, trainable_token_indices, exclude_modules,
// aLoRA, QA-LoRA, LoRA on embeddings or lm_head, peft_type != LORA; and for bad values: a regex
// that does not compile (naming the key and pattern), wrong value types, lists or patterns over
// kMaxLoraPatternCount entries or kMaxLoraPatternLength characters.
LoraConfig lora_config_from_json(const nlohmann::ordered_json& j, const std::string& context);
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
// a generator swaps versions without reallocating. The configs' per-module plans (which modules,
// each one's r and scaling) must match.
void load_adapter_weights(CausalLMImpl& model, const std::string& dir);

}  // namespace grpo::model
