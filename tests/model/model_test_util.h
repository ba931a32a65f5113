// Shared helpers for the core/model tests: golden data paths, reference logits, small configs.
#pragma once

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

inline Reference load_reference(const std::string& dir) {
  auto j = nlohmann::json::parse(read_file(dir + "/reference_logits.json"));
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

// A small config of any supported family (hidden 32, 2 layers, 4 heads, 2 kv heads, vocab 97).
inline io::ModelConfig small_config(const std::string& model_type, bool tied) {
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

}  // namespace grpo::model::test
