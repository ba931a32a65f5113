// The /v1/completions wire format of vLLM's OpenAI-compatible server (docs/workers.md, "Completion
// request" and "Completion response"): parsing and validating a request body into a CompletionJob,
// and building the CompletionResponse JSON from the sampler's completions. Prompts are token ids (a
// list, or a list of lists); strings are tokenized. Only `logprobs: 0` (or null) is served: the
// sampled token's processed log-prob. Unknown fields are ignored, as vLLM does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rollout/sampler.h"

namespace grpo::text { class Tokenizer; }

namespace grpo::cluster {

struct CompletionJob {
  std::string model;                             // as requested ("" = the base model)
  std::vector<std::vector<int64_t>> prompts;
  int64_t n = 1;
  rollout::SamplingParams params;                // seed unused here: see `seed`
  std::optional<uint64_t> seed;                  // per request; random when absent
  bool logprobs = false;                         // "logprobs": 0
  bool return_token_ids = false;
  bool return_tokens_as_token_ids = false;
  std::vector<int64_t> request_stop_token_ids;   // the request's own (for stop_reason)
};

struct ModelLimits {
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;
  std::vector<int64_t> eos_token_ids;  // appended to stop_token_ids unless ignore_eos
  int64_t max_n = 256;
  int64_t max_prompts = 1024;
  int64_t max_sequences = 256;       // prompts x n of one request (the worker's --max-batch)
  int64_t max_tokens_cap = 1 << 20;  // max_tokens when max_model_len is unknown (0)
  // Stop strings are matched against every sequence's decoded tail at every step, so their count
  // and length are bounded (a request with thousands of long ones would slow every batch).
  int64_t max_stop_strings = 32;
  int64_t max_stop_bytes = 1024;     // each
};

// Throws HttpError(400) naming the field for anything malformed or out of range.
CompletionJob parse_completion_request(const std::string& body, const ModelLimits& limits,
                                       const text::Tokenizer* tokenizer);

struct ResponseInfo {
  std::string adapter;   // lora_name, "" for the base model
  std::string sha256;    // adapter weights hash, "" for the base model
  std::string worker;    // the worker's name
  int64_t batch_requests = 1;
  double generation_s = 0;
};

// completions[p][s]: sample s of prompt p. Choice index = p * n + s, as vLLM numbers them.
nlohmann::json completion_response(const CompletionJob& job, const std::vector<std::vector<rollout::Completion>>& completions,
                                   const text::Tokenizer* tokenizer, const ResponseInfo& info);

}  // namespace grpo::cluster
