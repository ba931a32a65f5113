// Functions behind `grpo inspect` and `grpo logits`: a model directory's architecture summary and
// fp32 logits for a token sequence (optionally with a PEFT adapter).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::model {

// {"architecture","model_type","layers","hidden","intermediate","heads","kv_heads","head_dim",
//  "vocab","params","dtype_on_disk","tied","rope":{"theta","type",...},"max_position_embeddings",
//  "rms_norm_eps","qk_norm","attention_bias","files"}. Reads headers only, not the weights.
nlohmann::json inspect_model(const std::string& dir);

// Multi-line human summary of inspect_model()'s JSON.
std::string format_model_summary(const nlohmann::json& info);

// Logits (fp32, CPU) of `ids` as one sequence: one row per position, or only the last row.
std::vector<std::vector<float>> compute_logits(const std::string& model_dir, const std::vector<int64_t>& ids,
                                               const std::string& adapter_dir /* empty = none */,
                                               bool last_only);

}  // namespace grpo::model
