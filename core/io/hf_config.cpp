// Hugging Face config.json for the decoder-only families we run (Llama, Mistral, Qwen2/3, Gemma 1/2/3
// text, Phi-3): parse with transformers' defaults and validation, write back as save_pretrained
// does. Checkpoint lives in checkpoint.cpp.
#include "core/common/json_limits.h"
#include "core/io/hf_config.h"

#include <algorithm>
#include <cmath>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"

namespace grpo::io {

using nlohmann::json;

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types = {"llama", "mistral", "qwen2", "qwen3", "gemma",
                                                 "gemma2", "gemma3_text", "phi3"};
  return types;
}

namespace {

const char* kTransformersVersion = "4.51.3";
constexpr int64_t kMaxLayers = 100000;  // real models have at most a few hundred  // the oldest release with every supported model type

// Typed field access: every error names the field and the expected type; `ctx` names the file.
class Fields {
public:
  Fields(const json& j, std::string ctx) : j_(j), ctx_(std::move(ctx)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  bool present(const char* key) const { return j_.contains(key); }  // possibly null
  const json& raw(const char* key) const { return j_.at(key); }

  [[noreturn]] void type_error(const char* key, const char* expected, const json& v) const {
    std::string got = v.dump();
    if (got.size() > 40) got = got.substr(0, 40) + "...";
    throw Error(ctx_, std::string("field \"") + key + "\": expected " + expected + ", got " +
                          v.type_name() + " " + got);
  }
  void require(const char* key) const {
    if (!has(key))
      throw Error(ctx_, std::string("missing required field \"") + key + "\"",
                  "is this the config.json of a transformers model?");
  }

  int64_t integer(const char* key, const json& v) const {
    if (!v.is_number_integer()) type_error(key, "an integer", v);
    return v.get<int64_t>();
  }
  int64_t integer(const char* key) const { require(key); return integer(key, raw(key)); }
  int64_t integer(const char* key, int64_t fallback) const {
    return has(key) ? integer(key, raw(key)) : fallback;
  }
  int64_t positive(const char* key) const {
    int64_t v = integer(key);
    if (v <= 0) throw Error(ctx_, std::string("field \"") + key + "\": expected a positive integer, got " +
                                      std::to_string(v));
    return v;
  }
  double number(const char* key, const json& v) const {
    if (!v.is_number()) type_error(key, "a number", v);
    return v.get<double>();
  }
  double number(const char* key, double fallback) const {
    return has(key) ? number(key, raw(key)) : fallback;
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!raw(key).is_boolean()) type_error(key, "true or false", raw(key));
    return raw(key).get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!raw(key).is_string()) type_error(key, "a string", raw(key));
    return raw(key).get<std::string>();
  }
  const std::string& ctx() const { return ctx_; }

private:
  const json& j_;
  std::string ctx_;
};

// Per-type defaults, as the transformers config classes set them.
struct TypeDefaults {
  const char* architecture;
  int64_t max_position_embeddings;
  std::optional<int64_t> bos, eos;
  std::optional<int64_t> head_dim;  // nullopt: hidden_size / num_attention_heads
};
TypeDefaults defaults_for(const std::string& type) {
  if (type == "llama") return {"LlamaForCausalLM", 2048, 1, 2, std::nullopt};
  if (type == "mistral") return {"MistralForCausalLM", 4096 * 32, 1, 2, std::nullopt};
  if (type == "qwen2") return {"Qwen2ForCausalLM", 32768, std::nullopt, std::nullopt, std::nullopt};
  if (type == "gemma") return {"GemmaForCausalLM", 8192, 2, 1, 256};
  if (type == "gemma2") return {"Gemma2ForCausalLM", 8192, 2, 1, 256};
  if (type == "gemma3_text") return {"Gemma3ForCausalLM", 131072, 2, 1, 256};
  if (type == "phi3") return {"Phi3ForCausalLM", 4096, 1, 32000, std::nullopt};
  return {"Qwen3ForCausalLM", 32768, std::nullopt, std::nullopt, 128};
}

bool is_gemma(const std::string& type) { return type == "gemma" || type == "gemma2" || type == "gemma3_text"; }

const char* kRopeTypes = "default, linear, dynamic, yarn, longrope (su), llama3";

std::vector<double> factor_list(const Fields& f, const char* key) {
  f.require(key);
  const json& v = f.raw(key);
  if (!v.is_array() || v.size() > 65536) f.type_error(key, "a list of at most 65536 numbers", v);
  std::vector<double> out;
  for (const json& x : v) {
    if (!x.is_number() || !(x.get<double>() > 0)) f.type_error(key, "a list of positive numbers", v);
    out.push_back(x.get<double>());
  }
  return out;
}

// rope_scaling (or v5's rope_parameters, named by `key`): null, {"rope_type"|"type": "default"} or
// one of the scaled types of transformers' modeling_rope_utils. Range checks that need the rest of
// the config (longrope's list lengths) are in ModelConfig::from_json.
std::optional<RopeScaling> parse_rope_scaling(const json& r, const std::string& ctx, const char* key) {
  if (r.is_null()) return std::nullopt;
  const std::string rctx = ctx + ": " + key;
  if (!r.is_object())
    throw Error(ctx, std::string("field \"") + key + "\": expected null or an object, got " + r.type_name());
  Fields f(r, rctx);
  std::string type = f.has("rope_type") ? f.string("rope_type", "") : f.string("type", "");
  if (type.empty())
    throw Error(rctx, "missing \"rope_type\" (or \"type\")", std::string("supported rope types: ") + kRopeTypes);
  if (type == "default") return std::nullopt;
  if (type == "su") type = "longrope";  // Phi-3's first name for it, as transformers maps it
  const std::vector<std::string> types = {"linear", "dynamic", "yarn", "longrope", "llama3"};
  if (std::find(types.begin(), types.end(), type) == types.end())
    throw Error(rctx, "unsupported rope type \"" + type + "\"", std::string("supported rope types: ") + kRopeTypes);
  RopeScaling s;
  s.rope_type = type;
  s.original_max_position_embeddings = f.integer("original_max_position_embeddings", int64_t(0));
  check(s.original_max_position_embeddings >= 0, rctx, "original_max_position_embeddings must be positive");
  if (type == "llama3") {
    for (const char* k : {"factor", "low_freq_factor", "high_freq_factor"}) f.require(k);
    s.factor = f.number("factor", 1.0);
    s.low_freq_factor = f.number("low_freq_factor", 1.0);
    s.high_freq_factor = f.number("high_freq_factor", 4.0);
    s.original_max_position_embeddings = f.integer("original_max_position_embeddings");
    check(s.factor > 0 && s.high_freq_factor > s.low_freq_factor && s.original_max_position_embeddings > 0,
          rctx, "llama3 needs factor > 0, high_freq_factor > low_freq_factor, original_max_position_embeddings > 0");
    return s;
  }
  if (type == "longrope") {
    s.short_factor = factor_list(f, "short_factor");
    s.long_factor = factor_list(f, "long_factor");
    if (f.has("factor")) s.factor = f.number("factor", 1.0);
    if (f.has("attention_factor")) s.attention_factor = f.number("attention_factor", 1.0);
    check(s.factor > 0 && (!s.attention_factor || *s.attention_factor > 0), rctx,
          "longrope: factor and attention_factor must be positive");
    return s;
  }
  // linear, dynamic, yarn: "factor" is required and at least 1 (transformers' rope_config_validation).
  f.require("factor");
  s.factor = f.number("factor", 1.0);
  check(s.factor >= 1.0, rctx, type + ": field \"factor\" must be a number >= 1, got " + std::to_string(s.factor));
  if (type == "yarn") {
    s.beta_fast = f.number("beta_fast", 32.0);
    s.beta_slow = f.number("beta_slow", 1.0);
    if (f.has("mscale")) s.mscale = f.number("mscale", 1.0);
    if (f.has("mscale_all_dim")) s.mscale_all_dim = f.number("mscale_all_dim", 1.0);
    if (f.has("attention_factor")) s.attention_factor = f.number("attention_factor", 1.0);
    s.truncate = f.boolean("truncate", true);
    check(s.beta_fast > 0 && s.beta_slow > 0 && s.beta_fast > s.beta_slow, rctx,
          "yarn: beta_fast and beta_slow must be positive with beta_fast > beta_slow");
    check(!s.attention_factor || *s.attention_factor > 0, rctx, "yarn: attention_factor must be positive");
  }
  return s;
}

// Which layers slide: "layer_types" when the config lists them (transformers >= 4.53 writes it),
// else each family's rule.
std::vector<bool> sliding_layers_of(const Fields& f, const ModelConfig& c, const std::string& ctx) {
  const size_t n = size_t(c.num_hidden_layers);
  if (!c.sliding_window) return {};
  if (f.has("layer_types")) {
    const json& v = f.raw("layer_types");
    if (!v.is_array() || v.size() != n)
      f.type_error("layer_types", ("a list of " + std::to_string(n) + " layer types").c_str(), v);
    std::vector<bool> out;
    for (const json& t : v) {
      const std::string s = t.is_string() ? t.get<std::string>() : "";
      if (s != "sliding_attention" && s != "full_attention")
        throw Error(ctx, "field \"layer_types\": unsupported layer type " + t.dump(),
                    "supported: sliding_attention, full_attention");
      out.push_back(s == "sliding_attention");
    }
    return out;
  }
  std::vector<bool> out(n, true);  // mistral, phi3: every layer
  if (c.model_type == "gemma2") {
    for (size_t i = 0; i < n; ++i) out[i] = i % 2 == 0;  // Gemma2Attention: not bool(layer_idx % 2)
  } else if (c.model_type == "gemma3_text") {
    const int64_t pattern = f.integer("sliding_window_pattern", int64_t(6));
    check(pattern > 0, ctx, "field \"sliding_window_pattern\" must be a positive integer");
    for (size_t i = 0; i < n; ++i) out[i] = (int64_t(i) + 1) % pattern != 0;
  }
  return out;
}

std::vector<int64_t> parse_token_ids(const Fields& f, const char* key, std::optional<int64_t> fallback) {
  if (!f.present(key)) return fallback ? std::vector<int64_t>{*fallback} : std::vector<int64_t>{};
  const json& v = f.raw(key);
  if (v.is_null()) return {};  // an explicit null overrides the class default
  if (v.is_number_integer()) return {v.get<int64_t>()};
  std::vector<int64_t> ids;
  if (!v.is_array()) f.type_error(key, "an integer or a list of integers", v);
  for (const json& x : v) {
    if (!x.is_number_integer()) f.type_error(key, "an integer or a list of integers", v);
    ids.push_back(x.get<int64_t>());
  }
  return ids;
}

// What differs by family: biases, norms, activation, fused projections, soft-capping, sliding
// windows, and the rope-scaling checks that need the model's sizes.
void parse_family_features(const Fields& f, ModelConfig& c, const std::string& context) {
  const bool gemma = is_gemma(c.model_type);
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", gemma);
  if (c.model_type == "qwen2") {
    c.attention_bias = true;  // Qwen2 always has q/k/v bias (no o bias)
  } else if (c.model_type == "mistral" || c.model_type == "phi3") {
    c.attention_bias = false;  // no bias anywhere
  } else {
    c.attention_bias = f.boolean("attention_bias", false);
  }
  if (c.model_type == "llama") c.mlp_bias = f.boolean("mlp_bias", false);
  c.qk_norm = c.model_type == "qwen3" || c.model_type == "gemma3_text";
  c.gemma_norm = c.scale_embeddings = gemma;
  c.sandwich_norm = c.model_type == "gemma2" || c.model_type == "gemma3_text";
  c.fused_qkv = c.fused_gate_up = c.model_type == "phi3";

  // The MLP activation. Gemma reads "hidden_activation"; transformers <= 4.47 used approximate
  // GELU when it was missing (Gemma 1.0's configs say "hidden_act": "gelu", which the Gemma team
  // meant as the tanh approximation: transformers PR 29402), and so do we.
  std::string act = f.string("hidden_act", gemma ? "gelu_pytorch_tanh" : "silu");
  if (gemma) act = f.string("hidden_activation", "gelu_pytorch_tanh");
  const std::vector<std::string> acts = {"silu", "gelu", "gelu_pytorch_tanh"};
  check(std::find(acts.begin(), acts.end(), act) != acts.end(), context,
        std::string("field \"") + (gemma ? "hidden_activation" : "hidden_act") + "\": \"" + act + "\" is not supported",
        "supported: " + join(acts, ", "));
  c.hidden_act = act;

  if (c.model_type == "phi3") {
    c.partial_rotary_factor = f.number("partial_rotary_factor", 1.0);
    check(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1, context,
          "field \"partial_rotary_factor\" must be in (0, 1]");
    check(c.rotary_dim() % 2 == 0, context,
          "head_dim * partial_rotary_factor = " + std::to_string(c.rotary_dim()) + " must be even");
    // Phi3Config keeps the pretrained context here, outside rope_scaling; longrope reads it.
    if (c.rope_scaling && c.rope_scaling->original_max_position_embeddings == 0)
      c.rope_scaling->original_max_position_embeddings =
          f.integer("original_max_position_embeddings", c.max_position_embeddings);
  }
  if (c.model_type == "gemma2" || c.model_type == "gemma3_text") {
    c.query_pre_attn_scalar = f.number("query_pre_attn_scalar", 256.0);
    check(*c.query_pre_attn_scalar > 0, context, "field \"query_pre_attn_scalar\" must be positive");
    const double attn_cap = c.model_type == "gemma2" ? 50.0 : 0.0, final_cap = c.model_type == "gemma2" ? 30.0 : 0.0;
    auto cap = [&](const char* key, double fallback) -> std::optional<double> {
      const double v = f.present(key) ? (f.has(key) ? f.number(key, 0.0) : 0.0) : fallback;
      check(v >= 0, context, std::string("field \"") + key + "\" must be null or positive");
      return v > 0 ? std::optional<double>(v) : std::nullopt;
    };
    c.attn_logit_softcapping = cap("attn_logit_softcapping", attn_cap);
    c.final_logit_softcapping = cap("final_logit_softcapping", final_cap);
    // Gemma3Attention keeps attn_logit_softcapping but never applies it (transformers 4.50-4.57).
    if (c.model_type == "gemma3_text") c.attn_logit_softcapping.reset();
  }
  if (c.model_type == "gemma3_text") {
    c.rope_local_base_freq = f.number("rope_local_base_freq", 10000.0);
    check(*c.rope_local_base_freq > 1.0 && std::isfinite(*c.rope_local_base_freq), context,
          "field \"rope_local_base_freq\" must be a finite number above 1");
  }

  // Sliding windows: Mistral and Phi-3 slide every layer when sliding_window is set; Gemma 2/3
  // alternate (gemma2 default 4096). Qwen2's use_sliding_window is not supported.
  if (c.model_type == "qwen2" || c.model_type == "qwen3")
    check(!f.boolean("use_sliding_window", false), context,
          "field \"use_sliding_window\": sliding-window attention is not supported for " + c.model_type,
          "set use_sliding_window to false (full attention)");
  if (c.model_type == "mistral" || c.model_type == "phi3" || gemma) {
    const int64_t fallback = c.model_type == "gemma2" || c.model_type == "gemma3_text" ? 4096 : 0;
    const int64_t w = f.present("sliding_window") ? f.integer("sliding_window", int64_t(0)) : fallback;
    check(w >= 0, context, "field \"sliding_window\" must be null or a positive integer");
    if (w > 0 && c.model_type != "gemma") c.sliding_window = w;
    c.sliding_layers = sliding_layers_of(f, c, context);
  }

  // Rope scaling needs the model's sizes: check what could not be checked alone.
  if (c.rope_scaling) {
    auto& s = *c.rope_scaling;
    const std::string rctx = context + ": rope_scaling";
    if (s.rope_type == "longrope") {
      const size_t half = size_t(c.rotary_dim() / 2);
      check(s.short_factor.size() == half && s.long_factor.size() == half, rctx,
            "longrope: short_factor and long_factor must each have head_dim / 2 = " + std::to_string(half) +
                " entries, got " + std::to_string(s.short_factor.size()) + " and " + std::to_string(s.long_factor.size()));
    }
    if (s.rope_type == "dynamic" || s.rope_type == "yarn" || s.rope_type == "longrope") {
      if (s.original_max_position_embeddings == 0) s.original_max_position_embeddings = c.max_position_embeddings;
      check(s.original_max_position_embeddings > 0, rctx,
            s.rope_type + " needs original_max_position_embeddings (or max_position_embeddings) > 0");
    }
  }
}

}  // namespace

ModelConfig ModelConfig::from_json(const json& j, const std::string& context) {
  if (!j.is_object()) throw Error(context, std::string("expected a JSON object, got ") + j.type_name());
  Fields f(j, context);
  ModelConfig c;
  f.require("model_type");
  c.model_type = f.string("model_type", "");
  if (c.model_type == "gemma3")
    throw Error(context, "model_type \"gemma3\" is the multimodal Gemma 3 (Gemma3ForConditionalGeneration), which is not supported",
                "use a text-only Gemma 3 checkpoint (model_type \"gemma3_text\", e.g. google/gemma-3-1b-it)");
  const auto& types = supported_model_types();
  if (std::find(types.begin(), types.end(), c.model_type) == types.end()) {
    std::string near = nearest_name(c.model_type, types);
    throw Error(context, "unsupported model_type \"" + c.model_type + "\"",
                (near.empty() ? "" : "did you mean " + near + "? ") + "supported: " + join(types, ", "));
  }
  const TypeDefaults d = defaults_for(c.model_type);
  c.name_or_path = f.string("_name_or_path", "");

  c.vocab_size = f.positive("vocab_size");
  c.hidden_size = f.positive("hidden_size");
  c.intermediate_size = f.positive("intermediate_size");
  c.num_hidden_layers = f.positive("num_hidden_layers");
  // Per-layer tables (sliding_layers, layer_types) are sized from it: bound it before allocating.
  check(c.num_hidden_layers <= kMaxLayers, context,
        "field \"num_hidden_layers\": " + std::to_string(c.num_hidden_layers) + " is more than the " +
            std::to_string(kMaxLayers) + " we accept");
  c.num_attention_heads = f.positive("num_attention_heads");
  c.num_key_value_heads = f.integer("num_key_value_heads", c.num_attention_heads);
  check(c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0, context,
        "num_attention_heads " + std::to_string(c.num_attention_heads) + " is not a multiple of " +
            "num_key_value_heads " + std::to_string(c.num_key_value_heads));
  if (f.has("head_dim")) {
    c.head_dim = f.integer("head_dim");
  } else if (d.head_dim) {
    c.head_dim = *d.head_dim;
  } else {
    check(c.hidden_size % c.num_attention_heads == 0, context,
          "hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " +
              std::to_string(c.num_attention_heads),
          "set head_dim explicitly");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  check(c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim <= 65536, context,
        "head_dim " + std::to_string(c.head_dim) + " must be a positive even number (rotary embedding)");
  c.max_position_embeddings = f.integer("max_position_embeddings", d.max_position_embeddings);
  c.rms_norm_eps = f.number("rms_norm_eps", c.model_type == "phi3" ? 1e-5 : 1e-6);

  // Rotary: rope_theta + rope_scaling, or transformers v5's combined "rope_parameters".
  if (f.has("rope_parameters")) {
    const json& rp = f.raw("rope_parameters");
    if (!rp.is_object()) f.type_error("rope_parameters", "an object", rp);
    c.rope_theta = Fields(rp, context + ": rope_parameters").number("rope_theta", 10000.0);
    c.rope_scaling = parse_rope_scaling(rp, context, "rope_parameters");
  } else {
    c.rope_theta = f.number("rope_theta", 10000.0);
    c.rope_scaling = f.has("rope_scaling") ? parse_rope_scaling(f.raw("rope_scaling"), context, "rope_scaling") : std::nullopt;
  }
  check(c.rope_theta > 1.0 && std::isfinite(c.rope_theta), context,
        "field \"rope_theta\": " + std::to_string(c.rope_theta) + " must be a finite number above 1");

  parse_family_features(f, c, context);

  auto bos = parse_token_ids(f, "bos_token_id", d.bos);
  check(bos.size() <= 1, context, "field \"bos_token_id\": expected one integer, got a list");
  if (!bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = parse_token_ids(f, "eos_token_id", d.eos);

  // transformers < 4.56 writes "torch_dtype", newer releases "dtype".
  const char* dtype_key = f.has("torch_dtype") ? "torch_dtype" : "dtype";
  c.torch_dtype = f.string(dtype_key, "float32");
  const std::vector<std::string> dtypes = {"float32", "float16", "bfloat16"};
  if (std::find(dtypes.begin(), dtypes.end(), c.torch_dtype) == dtypes.end())
    throw Error(context, std::string("field \"") + dtype_key + "\": unsupported value \"" + c.torch_dtype + "\"",
                "supported: " + join(dtypes, ", "));
  c.source = j;
  return c;
}

ModelConfig ModelConfig::load(const std::string& config_json_path) {
  std::string text = read_file(config_json_path);
  json j;
  check_json_depth(text, config_json_path);
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(config_json_path, std::string("not valid JSON: ") + e.what());
  }
  return from_json(j, config_json_path);
}

static json rope_scaling_json(const RopeScaling& s) {
  json j = {{"rope_type", s.rope_type}, {"factor", s.factor}};
  if (s.original_max_position_embeddings > 0) j["original_max_position_embeddings"] = s.original_max_position_embeddings;
  if (s.rope_type == "llama3") {
    j["low_freq_factor"] = s.low_freq_factor;
    j["high_freq_factor"] = s.high_freq_factor;
  } else if (s.rope_type == "yarn") {
    j["beta_fast"] = s.beta_fast;
    j["beta_slow"] = s.beta_slow;
    if (s.mscale) j["mscale"] = *s.mscale;
    if (s.mscale_all_dim) j["mscale_all_dim"] = *s.mscale_all_dim;
    if (!s.truncate) j["truncate"] = false;
  } else if (s.rope_type == "longrope") {
    j["short_factor"] = s.short_factor;
    j["long_factor"] = s.long_factor;
  }
  if (s.attention_factor) j["attention_factor"] = *s.attention_factor;
  return j;
}

json ModelConfig::to_json() const {
  if (source.is_object()) {
    // Parsed from a file: write back every key transformers reads, with the dtype of the weights.
    json j = source;
    j[source.contains("dtype") && !source.contains("torch_dtype") ? "dtype" : "torch_dtype"] =
        torch_dtype.empty() ? "float32" : torch_dtype;
    return j;
  }
  const TypeDefaults d = defaults_for(model_type);
  json j;  // keys come out sorted, as save_pretrained's json.dumps(sort_keys=True)
  if (!name_or_path.empty()) j["_name_or_path"] = name_or_path;
  j["architectures"] = json::array({d.architecture});
  j["model_type"] = model_type;
  j["attention_dropout"] = 0.0;
  j["bos_token_id"] = bos_token_id ? json(*bos_token_id) : json(nullptr);
  if (eos_token_ids.empty()) j["eos_token_id"] = nullptr;
  else if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  else j["eos_token_id"] = eos_token_ids;
  j["hidden_act"] = hidden_act;
  if (gemma_norm) j["hidden_activation"] = hidden_act;
  j["hidden_size"] = hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = intermediate_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["num_attention_heads"] = num_attention_heads;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_key_value_heads"] = num_key_value_heads;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  j["rope_scaling"] = rope_scaling ? rope_scaling_json(*rope_scaling) : json(nullptr);
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["torch_dtype"] = torch_dtype.empty() ? "float32" : torch_dtype;
  j["transformers_version"] = kTransformersVersion;
  j["use_cache"] = true;
  j["vocab_size"] = vocab_size;
  if (model_type == "llama") {
    j["attention_bias"] = attention_bias;
    j["mlp_bias"] = mlp_bias;
    j["head_dim"] = head_dim;
    j["pretraining_tp"] = 1;
  } else if (model_type == "qwen2" || model_type == "qwen3") {
    j["max_window_layers"] = num_hidden_layers;
    j["sliding_window"] = nullptr;
    j["use_sliding_window"] = false;
    if (model_type == "qwen3") {
      j["attention_bias"] = attention_bias;
      j["head_dim"] = head_dim;
    } else if (head_dim != hidden_size / num_attention_heads) {
      j["head_dim"] = head_dim;  // Qwen2Config has no such key unless it differs
    }
  } else {
    j["head_dim"] = head_dim;
    j["sliding_window"] = sliding_window ? json(*sliding_window) : json(nullptr);
    if (!sliding_layers.empty()) {
      json types = json::array();
      for (bool s : sliding_layers) types.push_back(s ? "sliding_attention" : "full_attention");
      j["layer_types"] = types;
    }
    if (gemma_norm) j["attention_bias"] = attention_bias;
    if (query_pre_attn_scalar) j["query_pre_attn_scalar"] = *query_pre_attn_scalar;
    if (model_type == "gemma2" || model_type == "gemma3_text") {
      j["attn_logit_softcapping"] = attn_logit_softcapping ? json(*attn_logit_softcapping) : json(nullptr);
      j["final_logit_softcapping"] = final_logit_softcapping ? json(*final_logit_softcapping) : json(nullptr);
    }
    if (rope_local_base_freq) j["rope_local_base_freq"] = *rope_local_base_freq;
    if (model_type == "phi3") {
      j["partial_rotary_factor"] = partial_rotary_factor;
      if (rope_scaling) j["original_max_position_embeddings"] = rope_scaling->original_max_position_embeddings;
    }
  }
  return j;
}

void ModelConfig::save(const std::string& config_json_path) const {
  write_file_atomic(config_json_path, to_json().dump(2) + "\n");
}

}  // namespace grpo::io
