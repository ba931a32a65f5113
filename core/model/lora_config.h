// LoraConfig: the LoRA hyperparameters we support, with PEFT's names and semantics (r,
// lora_alpha, lora_dropout, target_modules, use_rslora, rank_pattern, alpha_pattern,
// layers_to_transform, layers_pattern, modules_to_save), and the per-module plan they give: which linear modules
// of the model (Hugging Face module names, e.g. "model.layers.0.self_attn.q_proj") get an
// adapter, with which rank and scaling. Parsing and writing adapter_config.json lives in
// peft_io.h; what PEFT features are still refused is listed there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace grpo::model {

// The linear projections of a decoder layer: the seven separate ones (Llama, Mistral, Qwen, Gemma),
// then Phi-3's fused qkv_proj and gate_up_proj.
const std::vector<std::string>& projection_names();
// Whether a family has the projection: fused (Phi-3: qkv_proj, o_proj, gate_up_proj, down_proj)
// or not (the seven separate ones).
bool family_has_projection(const std::string& name, bool fused);

// The modules a PEFT modules_to_save copy may replace, by full Hugging Face name, in module order.
const std::vector<std::string>& saveable_modules();
// Whether a modules_to_save entry is one we support: PEFT matches it as the end of a module name,
// so only names that end nothing but the saveable modules ("lm_head", "embed_tokens",
// "model.embed_tokens").
bool supported_module_to_save(const std::string& entry);

// Bounds on what an adapter_config.json may ask for (it is untrusted input): the length of one
// regex and the number of entries of each list or pattern object.
inline constexpr size_t kMaxLoraPatternLength = 4096;
inline constexpr size_t kMaxLoraPatternCount = 4096;

struct LoraConfig {
  int64_t r = 8;
  double lora_alpha = 8.0;
  double lora_dropout = 0.0;
  // "all-linear" (every projection; never lm_head, as in PEFT), or a list of projection names or
  // dotted module-name suffixes ("q_proj", "self_attn.q_proj", "model.layers.0.mlp.up_proj"), or
  // (target_regex) one Python-style regex that must match a whole module name.
  std::vector<std::string> target_modules = {"all-linear"};
  bool target_regex = false;
  bool use_rslora = false;
  // Per-module rank / alpha: the first key (in file order) whose regex matches the end of a
  // module name ("(.*\.)?(KEY)$") wins; otherwise r / lora_alpha.
  std::vector<std::pair<std::string, int64_t>> rank_pattern;
  std::vector<std::pair<std::string, double>> alpha_pattern;
  // Only these layer indices (empty = every layer; list targets only). layers_to_transform_int:
  // the file held a single integer (written back as one).
  std::vector<int64_t> layers_to_transform;
  bool layers_to_transform_int = false;
  // Names of the module list holding the layers ("layers"); empty = any "<name>.<index>." segment.
  // layers_pattern_string: the file held one string (written back as one).
  std::vector<std::string> layers_pattern;
  bool layers_pattern_string = false;
  // PEFT's modules_to_save: modules the adapter carries a whole trained copy of, each name matched
  // as the end of a module name (PEFT's key.endswith). Supported: lm_head and embed_tokens.
  std::vector<std::string> modules_to_save;

  // One adapted module: its rank, alpha and scaling (alpha / r, or alpha / sqrt(r) with rsLoRA).
  struct Target {
    int64_t r = 0;
    double lora_alpha = 0;
    double scaling = 0;
    bool operator==(const Target& o) const {
      return r == o.r && lora_alpha == o.lora_alpha && scaling == o.scaling;
    }
  };
  // The adapter of the module with this full Hugging Face name, or nullopt when it gets none
  // (PEFT's check_target_module_exists + LoraModel._create_and_replace). Throws grpo::Error when
  // a regex cannot run (layers_pattern with a capture group of its own, match limit).
  std::optional<Target> target_for(const std::string& module_name) const;

  // Whether modules_to_save names the module with this full Hugging Face name ("lm_head",
  // "model.embed_tokens").
  bool saves_module(const std::string& module_name) const;

  // Default scaling: lora_alpha / r (or / sqrt(r)).
  double scaling() const;
  // The largest rank any module may get (r and every rank_pattern value).
  int64_t max_rank() const;
  // True without patterns, layer subsets, a regex or modules_to_save: every targeted module has r and scaling(),
  // and targets()/resolved_targets() say which projections are adapted in every layer.
  bool plain() const;
  // True when the projection named `module` (e.g. "q_proj") is listed in target_modules (as a
  // name or the last component of a suffix). Meaningful for plain() configs; use target_for().
  bool targets(const std::string& module) const;
  // The targeted projection names, sorted (how adapter_config.json stores them). "all-linear"
  // expands to the projections of the model's family: Phi-3's fused ones when `fused`.
  std::vector<std::string> resolved_targets(bool fused = false) const;
  // Throws grpo::Error naming `context` for r <= 0, dropout outside [0,1), unknown modules,
  // regexes that do not compile, non-positive pattern ranks/alphas, lists over the bounds.
  void validate(const std::string& context) const;

  bool operator==(const LoraConfig& o) const;
  bool operator!=(const LoraConfig& o) const { return !(*this == o); }
};

}  // namespace grpo::model
