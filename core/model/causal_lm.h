// CausalLM: a decoder-only language model (Llama, Mistral, Qwen2/3, Gemma 1/2/3 text, Phi-3; see
// io::supported_model_types) with Hugging Face parameter names
// (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight,
// lm_head.weight when untied), LoRA adapters on its projections, and one forward that covers
// plain batches, left-padded batches, packed rows and incremental decoding with a KV cache.
//
// Compute dtype: fp32 (the CPU default) or bf16 (CUDA), chosen at construction; norms, softmax,
// rope tables and the returned logits are fp32 either way. fp64 works too (gradient checks).
// Loading/saving checkpoints: weights.h. PEFT adapters on disk: peft_io.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>
#include <torch/ordered_dict.h>
#include <torch/types.h>

#include "core/io/hf_config.h"
#include "core/model/decoder_layer.h"
#include "core/model/kv_cache.h"
#include "core/model/lora_config.h"
#include "core/model/lora_linear.h"
#include "core/model/norm.h"
#include "core/model/segments.h"

namespace grpo::model {

struct CausalLMOptions {
  explicit CausalLMOptions(io::ModelConfig config) : config_(std::move(config)) {}
  TORCH_ARG(io::ModelConfig, config);
  TORCH_ARG(torch::Dtype, dtype) = torch::kFloat32;  // compute dtype of the base weights
  TORCH_ARG(torch::Device, device) = torch::Device(torch::kCPU);
  // Random init as Hugging Face does (N(0, 0.02) weights, zero biases, unit norms); off when a
  // checkpoint is about to overwrite everything.
  TORCH_ARG(bool, init_weights) = true;
};

// bf16 on CUDA, fp32 otherwise.
torch::Dtype default_compute_dtype(const torch::Device& device);

// Everything a forward call may take besides input_ids (B, T). All optional.
struct ForwardArgs {
  // (B, T) 1/true = token, 0/false = padding. Batches of different lengths are LEFT-padded.
  torch::Tensor attention_mask;
  // (B, T) int64. Default: 0.. counting real tokens only (continuing the cache's counts), or
  // restarting at 0 for every packed sequence when seq_ids is given.
  torch::Tensor position_ids;
  // (B, T) int64 packed rows: a token attends only to earlier tokens with the same id; -1 marks
  // padding. Not combinable with a cache. See seq_ids_from_cu_seqlens().
  torch::Tensor seq_ids;
  // (B, T) int64, with seq_ids: a token also attends to every earlier token whose seq id equals its
  // prefix id (-1: none). Completions that share one forwarded prompt carry the prompt's seq id
  // here (docs/formulas.md, "Shared prompts"); give their position_ids too, continuing the prompt's.
  torch::Tensor prefix_ids;
  // Segmented attention of one row (B = 1; segments.h): every token is one segment's query, and
  // attends to that segment's prefix and its own earlier tokens only. Positions default to
  // prefix_len + t. Not combinable with attention_mask, seq_ids, a cache or sliding-window layers.
  std::vector<AttentionSegment> segments;
  // How segments are attended: the segment kernel where it runs (Auto), or buckets (tests compare the two).
  SegmentPath segment_path = SegmentPath::Auto;
  // Incremental decoding: the call's tokens are appended to the cache (see kv_cache.h).
  KVCache* cache = nullptr;
  // Logits of the last position only: (B, 1, V). With left padding that is every row's last
  // real token.
  bool last_only = false;
};

// Token embedding table "weight" (V, C).
class EmbeddingImpl : public torch::nn::Module {
public:
  EmbeddingImpl(int64_t vocab, int64_t dim, torch::TensorOptions options);
  torch::Tensor forward(const torch::Tensor& ids);  // (B, T) -> (B, T, C)
  torch::Tensor weight;
};
TORCH_MODULE(Embedding);

// The "model." part: embed_tokens, layers, norm.
class TransformerImpl : public torch::nn::Module {
public:
  TransformerImpl(const io::ModelConfig& config, torch::Dtype dtype, torch::Device device);
  Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  std::vector<DecoderLayer> decoder_layers;  // the same modules as `layers`, typed
  RMSNorm norm{nullptr};
};
TORCH_MODULE(Transformer);

class CausalLMImpl : public torch::nn::Module {
public:
  explicit CausalLMImpl(const CausalLMOptions& options);

  // input_ids (B, T) int64 -> logits (B, T, V) fp32 (fp64 for a double model), or (B, 1, V)
  // with args.last_only.
  torch::Tensor forward(const torch::Tensor& input_ids, const ForwardArgs& args = {});
  // Final-norm hidden states (B, T, C) (last position only with args.last_only).
  torch::Tensor hidden_states(const torch::Tensor& input_ids, const ForwardArgs& args = {});
  // hidden (..., C) -> logits (..., V) through lm_head (or the tied embedding), fp32 for
  // fp32/bf16/fp16 models.
  torch::Tensor logits(const torch::Tensor& hidden);

  // ---- LoRA ----
  // Attaches a fresh adapter (PEFT init) to every linear module the config's plan targets
  // (LoraConfig::target_for on its Hugging Face name: target list or regex, layers_to_transform,
  // each module's own r and scaling from rank_pattern / alpha_pattern) and freezes the base, so
  // only LoRA parameters require grad. Replaces an existing adapter. Throws grpo::Error, leaving
  // the model as it was, for a plan that selects nothing, lm_head, or (regex) a non-linear module.
  void add_lora(const LoraConfig& config);
  void remove_lora();  // drops the adapter; the base becomes trainable again
  bool has_lora() const { return lora_.has_value(); }
  const LoraConfig& lora_config() const;  // throws if no adapter
  // Disabled: the forward is exactly the base model (no copy of any weight).
  void set_adapter_enabled(bool enabled);
  bool adapter_enabled() const { return adapter_enabled_; }
  void merge_adapter();    // W += scaling * B A in every adapted layer
  void unmerge_adapter();  // undoes merge_adapter()
  bool adapter_merged() const;
  std::vector<torch::Tensor> lora_parameters() const;
  // PEFT's modules_to_save: the attached adapter's whole copy of "lm_head" or "model.embed_tokens"
  // (weight (vocab, hidden)), used instead of the base module while the adapter is enabled, as
  // PEFT's ModulesToSaveWrapper does. A tied model keeps computing logits with the base
  // embedding when only embed_tokens is saved (PEFT copies the module, not the tie). Cleared with
  // the adapter. Throws grpo::Error for another module name, a wrong shape or no adapter.
  void set_saved_module(const std::string& module, const torch::Tensor& weight);
  torch::Tensor saved_module(const std::string& module) const;  // undefined when not saved
  std::vector<std::string> saved_modules() const;               // in module order
  // "model.layers.0.self_attn.q_proj.lora_A.weight" -> tensor, in module order.
  torch::OrderedDict<std::string, torch::Tensor> named_lora_parameters() const;
  // Every projection (and an untied lm_head) by module path, e.g. "model.layers.0.mlp.up_proj".
  std::vector<std::pair<std::string, LoraLinear>> linear_layers() const;

  // ---- base weights ----
  // Hugging Face names -> tensors, without LoRA factors; tied models have no lm_head.weight.
  torch::OrderedDict<std::string, torch::Tensor> named_base_parameters() const;
  int64_t num_base_parameters() const;  // tied embedding counted once
  void set_base_trainable(bool trainable);
  // N(0, std) linears and embedding, zero biases, unit norms (Hugging Face's _init_weights).
  void init_weights(double std = 0.02);

  // Recompute each decoder layer's activations in backward instead of keeping them
  // (grad_checkpoint.h): less memory for long rows, one extra forward per layer. Applies to
  // forwards with grad enabled and no KV cache (training); generation is unaffected.
  void set_gradient_checkpointing(bool on) { gradient_checkpointing_ = on; }
  bool gradient_checkpointing() const { return gradient_checkpointing_; }

  const io::ModelConfig& config() const { return options_.config(); }
  torch::Dtype dtype() const { return options_.dtype(); }
  torch::Device device() const { return options_.device(); }
  bool tied() const { return config().tie_word_embeddings; }

  Transformer model{nullptr};
  LoraLinear lm_head{nullptr};  // untied only

private:
  CausalLMOptions options_;
  torch::Tensor inv_freq_;        // (R/2) fp32 rope inverse frequencies
  torch::Tensor inv_freq_local_;  // gemma3_text's sliding layers (rope_local_base_freq)
  std::optional<LoraConfig> lora_;
  torch::Tensor saved_embed_, saved_lm_head_;  // modules_to_save copies (V, C)
  bool adapter_enabled_ = true;
  bool gradient_checkpointing_ = false;
};
TORCH_MODULE(CausalLM);

// Packed rows: sequence ids (1, total) from cumulative lengths [0, l0, l0+l1, ...]; positions at
// or beyond the last boundary get -1 (padding).
torch::Tensor seq_ids_from_cu_seqlens(const std::vector<int64_t>& cu_seqlens, int64_t total);
// (B, T) positions restarting at 0 at each change of seq id.
torch::Tensor packed_position_ids(const torch::Tensor& seq_ids);

}  // namespace grpo::model
