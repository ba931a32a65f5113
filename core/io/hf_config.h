// Hugging Face model config.json (model_type llama, qwen2, qwen3) and checkpoint directories
// (model.safetensors, or shards listed in model.safetensors.index.json).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/safetensors.h"

namespace grpo::io {

struct RopeScaling {
  std::string rope_type;  // "llama3" (the only scaled type supported); "default" means none
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string model_type;  // llama | qwen2 | qwen3
  std::string name_or_path;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // defaults to hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v (and o for llama) bias; qwen2 always has q/k/v bias
  bool mlp_bias = false;
  bool qk_norm = false;         // qwen3: RMSNorm over q and k per head
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // eos_token_id may be an int or a list
  std::string torch_dtype;             // "float32" | "float16" | "bfloat16"

  // Parses and validates; `context` (usually the file path) prefixes every error. Errors for an
  // unsupported model_type list the supported ones; a missing field names it.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& context);
  static ModelConfig load(const std::string& config_json_path);
  // config.json as save_pretrained writes it (with "architectures", "model_type", ...).
  nlohmann::json to_json() const;
  // Writes to_json() (2-space indent, sorted keys, trailing newline) atomically.
  void save(const std::string& config_json_path) const;

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
};

const std::vector<std::string>& supported_model_types();

// A Hugging Face checkpoint directory: config + one or more safetensors files.
class Checkpoint {
public:
  static Checkpoint open(const std::string& dir);  // throws grpo::Error naming the file

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  // Every tensor name across all shards.
  std::vector<std::string> tensor_names() const;
  // The file holding `name` and its info; nullopt if absent. With an index, the index decides which
  // tensors the checkpoint holds. The pointers live as long as this Checkpoint (moves keep them).
  struct Entry { const SafetensorsFile* file; const TensorInfo* info; };
  std::optional<Entry> find(const std::string& name) const;
  // Like find, but throws grpo::Error naming the checkpoint and the tensor (with a did-you-mean).
  Entry at(const std::string& name) const;

private:
  std::string dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry> index_;  // tensor name -> where it lives
};

}  // namespace grpo::io
