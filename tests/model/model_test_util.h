// Shared helpers for the core/model tests: golden data paths, reference logits, small configs.
#pragma once

#include "tests/common/test_paths.h"
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/common/files.h"
#include "core/io/hf_config.h"

namespace grpo::model::test {

inline std::string golden_model(const std::string& name) {
  return std::string(GRPO_TEST_DATA) + "/golden/models/" + name;
}

struct Reference {
  torch::Tensor input_ids;  // (1, T) int64
  torch::Tensor logits;     // (T, V) fp32
};

inline Reference load_reference(const std::string& dir, const std::string& file = "reference_logits.json") {
  auto j = nlohmann::json::parse(read_file(dir + "/" + file));
  Reference r;
  r.input_ids = torch::tensor(j["input_ids"].get<std::vector<int64_t>>(), torch::kInt64).unsqueeze(0);
  std::vector<float> flat;
  for (const auto& row : j["logits"])
    for (const auto& v : row) flat.push_back(v.get<float>());
  r.logits = torch::tensor(flat).view({int64_t(j["logits"].size()), -1});
  return r;
}

inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// max |a - b| <= tol * max(1, max |b|): a tolerance relative to the reference's largest entry.
inline bool close_to(const torch::Tensor& a, const torch::Tensor& b, double tol) {
  return max_abs_diff(a, b) <= tol * std::max(1.0, b.abs().max().item<double>());
}

// A small config of a newer family, parsed from a config.json as a user's would be, so the
// family's derived flags (norm form, fused projections, sliding layers, soft-capping) come from
// ModelConfig::from_json: hidden 32, 4 heads, 2 kv heads, vocab 97; every feature switched on and
// small enough to matter in short test sequences (sliding window 4, caps 3 and 8).
inline io::ModelConfig family_config(const std::string& model_type, bool tied, nlohmann::json extra = {}) {
  nlohmann::json j = {{"model_type", model_type}, {"vocab_size", 97}, {"hidden_size", 32},
                      {"intermediate_size", 48}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"max_position_embeddings", 256},
                      {"tie_word_embeddings", tied}, {"torch_dtype", "float32"}, {"bos_token_id", 1},
                      {"eos_token_id", 2}, {"_name_or_path", "test/" + model_type}};
  if (model_type == "mistral") j["sliding_window"] = 4;
  if (model_type == "gemma" || model_type == "gemma2" || model_type == "gemma3_text") {
    j["head_dim"] = 16;  // heads * head_dim != hidden, as in real Gemmas
    j["hidden_activation"] = "gelu_pytorch_tanh";
  }
  if (model_type == "gemma2" || model_type == "gemma3_text") {
    j["num_hidden_layers"] = 3;
    j["sliding_window"] = 4;
    j["query_pre_attn_scalar"] = 12;
    j["attn_logit_softcapping"] = 3.0;
    j["final_logit_softcapping"] = 8.0;
  }
  if (model_type == "gemma3_text") {
    j["sliding_window_pattern"] = 2;
    j["rope_theta"] = 1e6;
    j["rope_local_base_freq"] = 1e4;
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  }
  if (model_type == "phi3") j["partial_rotary_factor"] = 0.5;
  for (const auto& [k, v] : extra.items()) j[k] = v;
  return io::ModelConfig::from_json(j, "test/" + model_type + "/config.json");
}

// A small config of any supported family (hidden 32, 2 layers, 4 heads, 2 kv heads, vocab 97).
inline io::ModelConfig small_config(const std::string& model_type, bool tied) {
  if (model_type != "llama" && model_type != "qwen2" && model_type != "qwen3") return family_config(model_type, tied);
  io::ModelConfig c;
  c.model_type = model_type;
  c.name_or_path = "test/" + model_type;
  c.vocab_size = 97;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = model_type == "qwen3" ? 16 : 8;  // qwen3: head_dim independent of hidden
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = model_type == "llama" ? 500000.0 : 1e6;
  c.tie_word_embeddings = tied;
  c.attention_bias = model_type == "qwen2";
  c.qk_norm = model_type == "qwen3";
  c.torch_dtype = "float32";
  c.eos_token_ids = {2};
  c.bos_token_id = 1;
  return c;
}

// Whether the autograd graph behind `t` holds a node whose name contains `name` (a custom
// function's node is named after its class), searched breadth-first over at most 64 nodes.
inline bool graph_has(const torch::Tensor& t, const std::string& name) {
  std::vector<std::shared_ptr<torch::autograd::Node>> todo{t.grad_fn()};
  for (size_t i = 0; i < todo.size() && i < 64; ++i) {
    if (!todo[i]) continue;
    if (todo[i]->name().find(name) != std::string::npos) return true;
    for (const auto& e : todo[i]->next_edges()) todo.push_back(e.function);
  }
  return false;
}

}  // namespace grpo::model::test
