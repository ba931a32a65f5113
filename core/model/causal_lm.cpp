// CausalLM: module wiring, per-call mask/position preparation, LoRA management.
#include "core/model/causal_lm.h"
#include "core/model/grad_checkpoint.h"

#include <algorithm>
#include <limits>

#include <torch/torch.h>
#include <torch/version.h>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/model/rope.h"

namespace grpo::model {

torch::Dtype default_compute_dtype(const torch::Device& device) {
  return device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
}

// ---------------------------------------------------------------- modules

EmbeddingImpl::EmbeddingImpl(int64_t vocab, int64_t dim, torch::TensorOptions options) {
  weight = register_parameter("weight", torch::empty({vocab, dim}, options));
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) {
  return torch::embedding(weight, ids);  // (B, T, C)
}

TransformerImpl::TransformerImpl(const io::ModelConfig& c, torch::Dtype dtype, torch::Device device) {
  auto to = torch::TensorOptions().dtype(dtype).device(device);
  embed_tokens = register_module("embed_tokens", Embedding(c.vocab_size, c.hidden_size, to));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    decoder_layers.push_back(DecoderLayer(c, i, dtype, device));
    layers->push_back(decoder_layers.back());
  }
  norm = register_module("norm", RMSNorm(RMSNormOptions(c.hidden_size)
                                             .eps(c.rms_norm_eps)
                                             .offset_one(c.gemma_norm)
                                             .dtype(dtype)
                                             .device(device)));
}

static void validate_config(const io::ModelConfig& c) {
  const std::string ctx = c.name_or_path.empty() ? "model config" : c.name_or_path;
  const auto& types = io::supported_model_types();
  check(std::find(types.begin(), types.end(), c.model_type) != types.end(), ctx,
        "model_type '" + c.model_type + "' is not supported", "supported: " + join(types, ", "));
  check(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.num_hidden_layers > 0,
        ctx, "vocab_size, hidden_size, intermediate_size and num_hidden_layers must be positive");
  check(c.num_attention_heads > 0 && c.num_key_value_heads > 0 &&
            c.num_attention_heads % c.num_key_value_heads == 0,
        ctx, "num_attention_heads (" + std::to_string(c.num_attention_heads) +
                 ") must be a positive multiple of num_key_value_heads (" +
                 std::to_string(c.num_key_value_heads) + ")");
  check(c.head_dim > 0 && c.head_dim % 2 == 0, ctx,
        "head_dim " + std::to_string(c.head_dim) + " must be positive and even");
  check(c.rotary_dim() > 0 && c.rotary_dim() % 2 == 0 && c.rotary_dim() <= c.head_dim, ctx,
        "head_dim * partial_rotary_factor must be a positive even number no larger than head_dim");
  check(!c.sliding_window || *c.sliding_window > 0, ctx, "sliding_window must be positive");
  check(c.sliding_layers.empty() || int64_t(c.sliding_layers.size()) == c.num_hidden_layers, ctx,
        "sliding_layers must name every layer (" + std::to_string(c.num_hidden_layers) + ")");
}

static io::ModelConfig with_defaults(io::ModelConfig c) {
  if (c.head_dim == 0 && c.num_attention_heads > 0) c.head_dim = c.hidden_size / c.num_attention_heads;
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (c.model_type == "qwen3") c.qk_norm = true;
  if (c.sliding_window && c.sliding_layers.empty())  // built in code: every layer slides
    c.sliding_layers.assign(size_t(std::max<int64_t>(c.num_hidden_layers, 0)), true);
  return c;
}

CausalLMImpl::CausalLMImpl(const CausalLMOptions& options) : options_(options) {
  options_.config(with_defaults(options.config()));
  const auto& c = config();
  validate_config(c);
  model = register_module("model", Transformer(c, dtype(), device()));
  if (!c.tie_word_embeddings)
    lm_head = register_module("lm_head", LoraLinear(LoraLinearOptions(c.hidden_size, c.vocab_size)
                                                        .dtype(dtype())
                                                        .device(device())));
  inv_freq_ = rope_inv_freq(c).to(device());
  if (c.rope_local_base_freq) inv_freq_local_ = rope_inv_freq(c, RopeKind::Local).to(device());
  if (options.init_weights()) init_weights();
}

void CausalLMImpl::init_weights(double std) {
  torch::NoGradGuard no_grad;
  model->embed_tokens->weight.normal_(0.0, std);
  for (auto& [name, lin] : linear_layers()) lin->reset_parameters(std);
  for (auto& m : modules(/*include_self=*/false))
    if (auto n = std::dynamic_pointer_cast<RMSNormImpl>(m)) n->weight.fill_(n->neutral_weight());
}

// ---------------------------------------------------------------- forward

torch::Tensor seq_ids_from_cu_seqlens(const std::vector<int64_t>& cu, int64_t total) {
  auto ids = torch::full({1, total}, -1, torch::kInt64);
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    check(cu[i] <= cu[i + 1] && cu[i + 1] <= total, "cu_seqlens",
          "must be non-decreasing and within the row length " + std::to_string(total));
    ids.narrow(1, cu[i], cu[i + 1] - cu[i]).fill_(int64_t(i));
  }
  return ids;  // (1, total)
}

torch::Tensor packed_position_ids(const torch::Tensor& seq_ids) {
  const int64_t B = seq_ids.size(0), T = seq_ids.size(1);
  auto idx = torch::arange(T, seq_ids.options().dtype(torch::kInt64)).expand({B, T});  // (B, T)
  auto boundary = torch::ones({B, T}, seq_ids.options().dtype(torch::kBool));
  if (T > 1) boundary.narrow(1, 1, T - 1).copy_(seq_ids.narrow(1, 1, T - 1) != seq_ids.narrow(1, 0, T - 1));
  auto starts = torch::where(boundary, idx, torch::zeros_like(idx));
  auto run_start = std::get<0>(torch::cummax(starts, 1));  // (B, T)
  return idx - run_start;
}

namespace {

struct Prepared {
  RopeTables rope;
  RopeTables rope_local;  // gemma3_text's sliding layers
  AttentionMask mask;
  AttentionMask mask_sliding;  // layers with a sliding window
  torch::Tensor new_valid;  // (B, T) bool, for the cache
};

Prepared prepare(const torch::Tensor& ids, const ForwardArgs& a, const io::ModelConfig& c,
                 const torch::Tensor& inv_freq, const torch::Tensor& inv_freq_local, torch::Dtype dtype) {
  const int64_t B = ids.size(0), T = ids.size(1);
  auto dev = ids.device();
  auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(dev);
  KVCache* cache = a.cache;
  const int64_t L = cache ? cache->length() : 0;
  check(!(cache && a.seq_ids.defined()), "forward", "packed rows (seq_ids) cannot use a KV cache");
  check(!a.prefix_ids.defined() || (a.seq_ids.defined() && a.prefix_ids.sizes() == a.seq_ids.sizes()), "forward",
        "prefix_ids needs seq_ids of the same shape");
  if (cache && L > 0)
    check(cache->batch_size() == B, "forward",
          "batch has " + std::to_string(B) + " rows, KV cache has " + std::to_string(cache->batch_size()),
          "expand_rows/select_rows the cache first");

  Prepared p;
  if (!a.segments.empty()) {
    check(B == 1 && !cache && !a.attention_mask.defined() && !a.seq_ids.defined(), "forward",
          "segments take one row (B = 1) without attention_mask, seq_ids or a KV cache");
    check(std::find(c.sliding_layers.begin(), c.sliding_layers.end(), true) == c.sliding_layers.end(), "forward",
          "segments do not support sliding-window layers (" + c.model_type + ")", "use packed rows (seq_ids)");
    p.mask.causal_only = false;
    p.mask.segments = plan_segments(a.segments, T, dtype, dev, c.head_dim, c.attn_logit_softcapping.value_or(0.0),
                                     a.segment_path);  // checks them
    p.new_valid = torch::ones({B, T}, i64.dtype(torch::kBool));
    auto pos = a.position_ids.defined() ? a.position_ids.to(dev).to(torch::kInt64).expand({B, T})
                                        : p.mask.segments->positions;
    auto global_inv = inv_freq;
    if (rope_depends_on_length(c) && pos.numel() > 0)
      global_inv = rope_inv_freq(c, RopeKind::Global, pos.max().item<int64_t>()).to(dev);
    p.rope = rope_tables(global_inv, pos, dtype, rope_attention_scaling(c));
    return p;
  }
  if (a.attention_mask.defined()) p.new_valid = a.attention_mask.to(dev).to(torch::kBool);
  else if (a.seq_ids.defined()) p.new_valid = a.seq_ids.to(dev) >= 0;
  else p.new_valid = torch::ones({B, T}, i64.dtype(torch::kBool));  // (B, T)

  torch::Tensor pos;  // (B, T)
  if (a.position_ids.defined()) {
    pos = a.position_ids.to(dev).to(torch::kInt64).expand({B, T});
  } else if (a.seq_ids.defined()) {
    pos = packed_position_ids(a.seq_ids.to(dev));
  } else if (a.attention_mask.defined() || L > 0) {
    auto past = L > 0 ? cache->token_counts().to(dev) : torch::zeros({B}, i64);  // (B)
    pos = (past.unsqueeze(1) + p.new_valid.to(torch::kInt64).cumsum(1) - 1).clamp_min(0);
  } else {
    pos = torch::arange(T, i64).unsqueeze(0).expand({B, T});
  }
  // Dynamic and longrope frequencies depend on the call's largest position, as transformers'
  // dynamic_rope_update makes them depend on torch.max(position_ids) + 1.
  auto global_inv = inv_freq;
  if (rope_depends_on_length(c) && pos.numel() > 0)
    global_inv = rope_inv_freq(c, RopeKind::Global, pos.max().item<int64_t>()).to(dev);
  p.rope = rope_tables(global_inv, pos, dtype, rope_attention_scaling(c));
  if (inv_freq_local.defined()) p.rope_local = rope_tables(inv_freq_local, pos, dtype, rope_attention_scaling(c, RopeKind::Local));

  // Mask over keys [0, L+T): causal, key padding (cache + attention_mask), packed sequences.
  const bool causal_only = L == 0 && !a.attention_mask.defined() && !a.seq_ids.defined();
  auto q_idx = torch::arange(L, L + T, i64);                             // (T)
  auto k_idx = torch::arange(L + T, i64);                                // (S)
  auto blocked = (k_idx.unsqueeze(0) > q_idx.unsqueeze(1)).unsqueeze(0);  // (1, T, S)
  torch::Tensor key_valid;  // (B, S): cached slots, then this call's
  if (!causal_only) {
    key_valid = L > 0 ? torch::cat({cache->valid().to(dev), p.new_valid}, 1) : p.new_valid;
    blocked = blocked | key_valid.logical_not().unsqueeze(1);  // (B, T, S)
    if (a.seq_ids.defined()) {
      auto s = a.seq_ids.to(dev);                                      // (B, T)
      auto other = s.unsqueeze(2) != s.unsqueeze(1);                   // (B, T, T)
      if (a.prefix_ids.defined()) {
        auto pre = a.prefix_ids.to(dev);                               // (B, T)
        other = other & ((pre.unsqueeze(2) != s.unsqueeze(1)) | (pre < 0).unsqueeze(2));
      }
      blocked = blocked | other;
    }
  }
  p.mask = attention_mask(blocked, causal_only, dtype);
  // Sliding layers also hide keys `sliding_window` or more tokens back: a query sees itself and
  // the window - 1 tokens before it, as transformers' sliding masks do. Distances are counted in
  // real tokens (position ids), not cache slots, so a padding hole in a generation row does not
  // shrink its window; for rows without holes (all transformers makes) the two are the same.
  if (c.sliding_window && std::find(c.sliding_layers.begin(), c.sliding_layers.end(), true) != c.sliding_layers.end()) {
    const int64_t W = *c.sliding_window;
    if (L + T > W) {
      // (B, S): a cache implies !causal_only, so key_valid is set whenever L > 0.
      auto k_pos = L == 0 ? pos : key_valid.to(torch::kInt64).cumsum(1) - 1;
      auto far = (pos.unsqueeze(2) - k_pos.unsqueeze(1)) >= W;  // (B, T, S)
      p.mask_sliding = attention_mask(blocked | far, false, dtype);
    } else {
      p.mask_sliding = attention_mask(blocked, causal_only, dtype);
    }
  }
  return p;
}

}  // namespace

torch::Tensor CausalLMImpl::hidden_states(const torch::Tensor& input_ids, const ForwardArgs& args) {
  check(input_ids.dim() == 2, "forward", "input_ids must be (B, T), got " + std::to_string(input_ids.dim()) + " dims");
  auto ids = input_ids.to(device(), torch::kInt64);
  const auto& c = config();
  auto p = prepare(ids, args, c, inv_freq_, inv_freq_local_, dtype());
  auto h = adapter_enabled_ && saved_embed_.defined() ? torch::embedding(saved_embed_, ids)
                                                      : model->embed_tokens(ids);  // (B, T, C)
  if (c.scale_embeddings) {
    // Gemma: times sqrt(hidden_size) rounded to the compute dtype, as transformers' normalizer.
    h = h * torch::scalar_tensor(std::sqrt(double(c.hidden_size)), torch::TensorOptions().dtype(h.scalar_type()))
                .item<double>();
  }
  const bool recompute = gradient_checkpointing_ && !args.cache && torch::GradMode::is_enabled();
  for (size_t i = 0; i < model->decoder_layers.size(); ++i) {
    auto& layer = model->decoder_layers[i];
    const bool sliding = c.is_sliding(int64_t(i));
    const RopeTables& rope = sliding && p.rope_local.cos.defined() ? p.rope_local : p.rope;
    const AttentionMask& mask = sliding ? p.mask_sliding : p.mask;
    if (recompute) {
      // The block runs again in backward, after this frame is gone: capture by value.
      h = checkpointed([layer, rope, mask](const torch::Tensor& x) mutable {
        return layer(x, rope, mask, static_cast<KVCache*>(nullptr));
      }, h);
    } else {
      h = layer(h, rope, mask, args.cache);
    }
  }
  if (args.cache) args.cache->advance(p.new_valid);
  if (args.last_only) h = h.narrow(1, h.size(1) - 1, 1);  // (B, 1, C)
  return model->norm(h);
}

torch::Tensor CausalLMImpl::logits(const torch::Tensor& hidden) {
  const auto out_dtype = accumulate_dtype(dtype());  // fp32 (fp64 for a double model)
  // The head's weight (V, C) when it is a plain matrix: the adapter's own copy (modules_to_save)
  // while the adapter is on, else the tied embedding; an untied lm_head is a LoraLinear.
  const torch::Tensor* W = adapter_enabled_ && saved_lm_head_.defined() ? &saved_lm_head_
                           : lm_head                                    ? nullptr
                                                                        : &model->embed_tokens->weight;
  torch::Tensor out;
  if (W) {
    auto sizes = hidden.sizes().vec();
    sizes.back() = W->size(0);
    out = torch::mm(hidden.reshape({-1, hidden.size(-1)}), W->t()).view(sizes).to(out_dtype);  // (..., V)
  } else {
    out = lm_head(hidden).to(out_dtype);  // (..., V)
  }
  if (const auto& cap = config().final_logit_softcapping) out = torch::tanh(out / *cap) * *cap;  // Gemma 2
  return out;
}

torch::Tensor CausalLMImpl::forward(const torch::Tensor& input_ids, const ForwardArgs& args) {
  return logits(hidden_states(input_ids, args));
}

// ---------------------------------------------------------------- LoRA

std::vector<std::pair<std::string, LoraLinear>> CausalLMImpl::linear_layers() const {
  std::vector<std::pair<std::string, LoraLinear>> out;
  for (const auto& item : named_modules("", /*include_self=*/false))
    if (auto lin = std::dynamic_pointer_cast<LoraLinearImpl>(item.value()))
      out.emplace_back(item.key(), LoraLinear(lin));
  return out;
}

void CausalLMImpl::add_lora(const LoraConfig& cfg) {
  cfg.validate("LoRA config");
  // The plan first (each linear module by its Hugging Face name, as PEFT matches them), so that a
  // config that cannot apply leaves the model as it was.
  std::vector<std::pair<LoraLinear, LoraConfig::Target>> plan;
  for (auto& [name, lin] : linear_layers()) {
    auto t = cfg.target_for(name);
    if (!t) continue;
    check(name != "lm_head", "LoRA config", "target_modules selects lm_head: LoRA on lm_head is not supported",
          "adapt the attention/MLP projections only");
    plan.emplace_back(lin, *t);
  }
  if (cfg.target_regex) {
    // PEFT refuses a regex that selects a module it cannot adapt; so do we (lm_head exists in
    // Hugging Face's tied models too, sharing the embedding).
    check(!cfg.target_for("lm_head"), "LoRA config", "target_modules regex selects lm_head: LoRA on lm_head is not supported");
    std::vector<std::string> inside;  // modules below a LoraLinear (lora_A, lora_B) are ours, not Hugging Face's
    for (const auto& item : named_modules("", /*include_self=*/false)) {
      const auto& name = item.key();
      if (std::any_of(inside.begin(), inside.end(), [&](const std::string& p) { return starts_with(name, p); })) continue;
      if (std::dynamic_pointer_cast<LoraLinearImpl>(item.value())) {
        inside.push_back(name + ".");
        continue;
      }
      check(!cfg.target_for(name), "LoRA config",
            "target_modules regex /" + cfg.target_modules[0] + "/ selects " + name +
                ", which is not a linear projection (PEFT refuses it too)",
            "anchor the regex on the projection names, e.g. .*\\.(q_proj|v_proj)");
    }
  }
  check(!plan.empty(), "LoRA config", "target_modules selects no linear module of the model",
        config().fused_qkv ? "this " + config().model_type +
                                 " model fuses its projections: use qkv_proj, o_proj, gate_up_proj, down_proj or all-linear"
                           : std::string("module names look like model.layers.0.self_attn.q_proj"));
  remove_lora();
  for (auto& [lin, t] : plan) lin->add_lora(t.r, t.scaling, cfg.lora_dropout);
  saved_embed_ = saved_lm_head_ = torch::Tensor();
  lora_ = cfg;
  adapter_enabled_ = true;
  set_base_trainable(false);
}

void CausalLMImpl::set_saved_module(const std::string& module, const torch::Tensor& weight) {
  check(lora_.has_value(), "modules_to_save", "no LoRA adapter attached to carry " + module);
  const auto& saveable = saveable_modules();
  check(std::find(saveable.begin(), saveable.end(), module) != saveable.end(), "modules_to_save",
        "module " + module + " cannot be saved whole", "supported: " + join(saveable, ", "));
  const auto& c = config();
  const std::vector<int64_t> want = {c.vocab_size, c.hidden_size};
  check(weight.sizes().vec() == want, "modules_to_save",
        module + ".weight: shape " + std::to_string(weight.size(0)) + (weight.dim() > 1 ? "x" + std::to_string(weight.size(-1)) : "") +
            ", expected " + std::to_string(want[0]) + "x" + std::to_string(want[1]));
  auto w = weight.detach().to(device(), dtype()).clone();
  (module == "lm_head" ? saved_lm_head_ : saved_embed_) = w;
}

torch::Tensor CausalLMImpl::saved_module(const std::string& module) const {
  if (module == "lm_head") return saved_lm_head_;
  if (module == "model.embed_tokens") return saved_embed_;
  return {};
}

std::vector<std::string> CausalLMImpl::saved_modules() const {
  std::vector<std::string> out;
  if (saved_embed_.defined()) out.push_back("model.embed_tokens");
  if (saved_lm_head_.defined()) out.push_back("lm_head");
  return out;
}

void CausalLMImpl::remove_lora() {
  saved_embed_ = saved_lm_head_ = torch::Tensor();
  if (!lora_) return;
  for (auto& [name, lin] : linear_layers()) lin->remove_lora();
  lora_.reset();
  set_base_trainable(true);
}

const LoraConfig& CausalLMImpl::lora_config() const {
  check(lora_.has_value(), "model", "no LoRA adapter attached");
  return *lora_;
}

void CausalLMImpl::set_adapter_enabled(bool enabled) {
  for (auto& [name, lin] : linear_layers()) lin->set_lora_enabled(enabled);
  adapter_enabled_ = enabled;
}

void CausalLMImpl::merge_adapter() {
  for (auto& [name, lin] : linear_layers())
    if (lin->lora_enabled()) lin->merge();
}

void CausalLMImpl::unmerge_adapter() {
  for (auto& [name, lin] : linear_layers()) lin->unmerge();
}

bool CausalLMImpl::adapter_merged() const {
  for (const auto& [name, lin] : linear_layers())
    if (lin->merged()) return true;
  return false;
}

torch::OrderedDict<std::string, torch::Tensor> CausalLMImpl::named_lora_parameters() const {
  torch::OrderedDict<std::string, torch::Tensor> out;
  for (const auto& item : named_parameters())
    if (item.key().find(".lora_") != std::string::npos) out.insert(item.key(), item.value());
  return out;
}

std::vector<torch::Tensor> CausalLMImpl::lora_parameters() const {
  return named_lora_parameters().values();
}

// ---------------------------------------------------------------- base weights

torch::OrderedDict<std::string, torch::Tensor> CausalLMImpl::named_base_parameters() const {
  torch::OrderedDict<std::string, torch::Tensor> out;
  for (const auto& item : named_parameters())
    if (item.key().find(".lora_") == std::string::npos) out.insert(item.key(), item.value());
  return out;
}

int64_t CausalLMImpl::num_base_parameters() const {
  int64_t n = 0;
  for (const auto& item : named_base_parameters()) n += item.value().numel();
  return n;
}

void CausalLMImpl::set_base_trainable(bool trainable) {
  for (auto& item : named_base_parameters()) item.value().requires_grad_(trainable);
}

}  // namespace grpo::model
