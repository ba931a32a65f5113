// Policy: what every stage of a run shares about the model being trained: the base model with
// its LoRA adapter, the tokenizer, how prompts become token ids (chat template or plain text),
// and which token ids end a completion. Built from a TrainConfig.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/grpo/config.h"
#include "core/model/causal_lm.h"
#include "core/rollout/dataset.h"
#include "core/rollout/greedy_eval.h"
#include "core/rollout/sampler.h"
#include "core/text/tokenizer.h"

namespace grpo::run {

model::LoraConfig lora_config_from(const grpo::TrainConfig& cfg);

struct Policy {
  std::string model_dir;                // the folder read (a Hub repo id's cache snapshot)
  std::string model_commit;             // that snapshot's commit ("" for a local folder)
  model::CausalLM model{nullptr};
  std::shared_ptr<text::Tokenizer> tokenizer;
  std::vector<int64_t> stop_token_ids;  // config + generation_config eos ids, the template's end token
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();  // TRL's chat_template_kwargs

  // The tokenizer has a chat template (conversations use it).
  bool chat() const;
  // Prompt ids of an example, left-truncated to max_prompt_length tokens.
  std::vector<int64_t> encode_prompt(const rollout::Example& ex, int64_t max_prompt_length) const;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = true) const;
  rollout::SamplingParams sampling_params(const grpo::TrainConfig& cfg, uint64_t seed) const;
  // How rollout::greedy_accuracy evaluates this policy: its prompt encoding (left-truncated to
  // max_prompt_length; 0 = whole), its decoding, and `params` (the caller's; temperature 0).
  rollout::GreedyEval greedy_eval(rollout::SamplingParams params, int64_t max_prompt_length) const;
};

// Loads model_name_or_path (a folder, or a Hub repo id at model_revision in the Hugging Face
// cache: core/hub/hf_cache.h) (weights, tokenizer) onto the default device and attaches a fresh
// LoRA adapter configured by `cfg` (when with_lora).
Policy load_policy(const grpo::TrainConfig& cfg, bool with_lora = true);

}  // namespace grpo::run
