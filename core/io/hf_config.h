// Hugging Face model config.json (model_type llama, mistral, qwen2, qwen3, gemma, gemma2,
// gemma3_text, phi3) and checkpoint directories (model.safetensors, or shards listed in
// model.safetensors.index.json).
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

// rope_scaling, as transformers' modeling_rope_utils reads it. "default" means none.
struct RopeScaling {
  std::string rope_type;  // linear | dynamic | yarn | longrope | llama3
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  // llama3, yarn, dynamic and longrope; 0 = the model's max_position_embeddings.
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0, beta_slow = 1.0;       // yarn
  std::optional<double> mscale = {}, mscale_all_dim = {};  // yarn
  std::optional<double> attention_factor = {};             // yarn, longrope: cos/sin scale
  bool truncate = true;                                    // yarn
  std::vector<double> short_factor = {}, long_factor = {};  // longrope, head_dim/2 each
};

struct ModelConfig {
  std::string model_type;  // one of supported_model_types()
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
  bool qk_norm = false;         // qwen3, gemma3_text: RMSNorm over q and k per head
  std::string hidden_act = "silu";  // MLP activation: silu | gelu_pytorch_tanh (Gemma)
  // The Gemma family: RMSNorm scales by (1 + weight) in fp32 before casting back, and the token
  // embeddings are multiplied by sqrt(hidden_size) in the compute dtype.
  bool gemma_norm = false;
  bool scale_embeddings = false;
  // gemma2 / gemma3_text: the attention and MLP outputs are normalised too
  // (post_attention_layernorm on the attention output, pre_/post_feedforward_layernorm around the MLP).
  bool sandwich_norm = false;
  bool fused_qkv = false;      // phi3: one qkv_proj (q, then k, then v rows)
  bool fused_gate_up = false;  // phi3: one gate_up_proj (gate rows, then up rows)
  double partial_rotary_factor = 1.0;  // rope on the first head_dim * factor dims only
  std::optional<double> query_pre_attn_scalar;  // attention scale scalar^-0.5 instead of head_dim^-0.5
  std::optional<double> attn_logit_softcapping;   // scores -> cap * tanh(scores / cap)
  std::optional<double> final_logit_softcapping;  // logits -> cap * tanh(logits / cap)
  // Sliding-window attention: layer i sees only the last `sliding_window` keys (itself included)
  // when sliding_layers[i]. Empty sliding_layers: no layer slides.
  std::optional<int64_t> sliding_window;
  std::vector<bool> sliding_layers;
  // gemma3_text: sliding layers use the default rope with this base (no scaling); the others
  // rope_theta and rope_scaling.
  std::optional<double> rope_local_base_freq;
  // The config.json object this was parsed from (empty when built in code). to_json() writes it
  // back with torch_dtype updated, so an export keeps every key transformers reads.
  nlohmann::json source;
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
  bool is_sliding(int64_t layer) const {
    return sliding_window && layer >= 0 && size_t(layer) < sliding_layers.size() && sliding_layers[size_t(layer)];
  }
  int64_t rotary_dim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
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
