// `grpo bench generate`: sampling throughput of the Sampler for GRPO groups — G completions for
// each of P prompts — with and without group prefix sharing (one prefill per prompt whose KV is
// expanded to its G samples, against prefilling every sample's copy of the prompt).
//
// Equal work on both sides: prompts are deterministic random token ids of varied length
// (prompt_min..prompt_max, left-padded in the batch), generation has no stop tokens and always
// runs max_tokens new tokens, so tokens/s = P * G * max_tokens / wall seconds of generate().
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace grpo::rollout {

struct GenerateBenchOptions {
  std::string model_dir;      // a checkpoint; empty = generate `size` (random init)
  std::string size = "25m";   // "tiny" | "25m" | "100m" (model::bench_model_config)
  int64_t prompts = 16;       // P
  int64_t group = 8;          // G = num_generations
  int64_t prompt_min = 64;    // prompt lengths spread over [prompt_min, prompt_max]
  int64_t prompt_max = 128;
  int64_t max_tokens = 64;    // new tokens per completion (fixed: no stop tokens)
  double temperature = 1.0;
  int threads = 0;            // 0 = LibTorch's default
  std::string device = "cpu";  // "cpu" | "cuda" | "cuda:N"; the device's compute dtype (bf16 on CUDA)
  int iters = 1;              // timed repeats (median) of each mode, after a short warm-up
};

// Keys: tok_s (shared prefix), tok_s_unshared, speedup_shared, shared_s, unshared_s,
// tokens_generated, prompts, group, prompt_len_min, prompt_len_max, prompt_len_mean, max_tokens,
// model, params, threads, outputs_match_frac (the counter-based RNG makes both modes draw the same
// tokens up to floating-point ties; reported, not required).
nlohmann::json bench_generate(const GenerateBenchOptions& options);

}  // namespace grpo::rollout
