// Sampler: batched generation of G completions for each of many prompts with the KV cache.
// Each prompt is prefilled once and its cached keys/values are shared by the G samples of its
// group (KVCache::expand_rows). Temperature, top-k, top-p and min-p; stops on EOS/stop token ids
// and stop strings; finish reason "stop" or "length"; each token's log-probability under the
// distribution it was drawn from (vLLM's processed_logprobs).
//
// Randomness is counter-based: the uniform draw for sample s of prompt p at step t depends only
// on (seed, p, s, t), never on batch composition or order, so a completion is reproducible
// whether it was generated alone, in a bigger batch, with or without prefix sharing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/causal_lm.h"

namespace grpo::text { class Tokenizer; }

namespace grpo::rollout {

// SplitMix64's finaliser: the mixing step of the counter-based random streams (a sample's
// stream is a hash of seed, prompt key, sample index and step), shared with workers.
uint64_t splitmix64(uint64_t x);

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy
  double top_p = 1.0;
  int64_t top_k = 0;         // 0 = off
  double min_p = 0.0;        // 0 = off
  int64_t max_tokens = 256;  // max_completion_length
  std::vector<int64_t> stop_token_ids;    // EOS ids and any others
  std::vector<std::string> stop;          // stop strings (needs a tokenizer)
  uint64_t seed = 0;
};

struct Completion {
  std::vector<int64_t> token_ids;   // includes the stop/EOS token when finish_reason == "stop"
  std::vector<float> logprobs;      // one per token, processed (after temperature and filters)
  std::string finish_reason;        // "stop" | "length"
};

// Processes one step's logits (R, V) fp32 into the sampling distribution's log-probs (R, V),
// -inf outside the kept set. Exposed for tests and for the trainer's entropy metric.
torch::Tensor processed_logprobs(const torch::Tensor& logits, const SamplingParams& p);

class Sampler {
public:
  // tokenizer may be null when no stop strings are used.
  Sampler(model::CausalLM model, const text::Tokenizer* tokenizer = nullptr);

  // prompts: token ids (different lengths allowed); n: samples per prompt (the group size G).
  // prompt_keys: stable ids of the prompts for the counter-based RNG (default 0..P-1).
  // Returns [P][n] completions.
  std::vector<std::vector<Completion>> generate(const std::vector<std::vector<int64_t>>& prompts, int64_t n,
                                                const SamplingParams& params, bool share_prefix = true,
                                                const std::vector<uint64_t>& prompt_keys = {});

  int64_t tokens_generated() const { return tokens_generated_; }

private:
  model::CausalLM model_;
  const text::Tokenizer* tokenizer_;
  int64_t tokens_generated_ = 0;
};

}  // namespace grpo::rollout
