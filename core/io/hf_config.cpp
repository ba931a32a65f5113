// Hugging Face config.json for the Llama / Qwen2 / Qwen3 family: parse with transformers' defaults
// and validation, write back as save_pretrained does. Checkpoint lives in checkpoint.cpp.
#include "core/common/json_limits.h"
#include "core/io/hf_config.h"

#include <algorithm>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"

namespace grpo::io {

using nlohmann::json;

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types = {"llama", "qwen2", "qwen3"};
  return types;
}

namespace {

const char* kTransformersVersion = "4.51.3";  // the oldest release with all three model types

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
  if (type == "qwen2") return {"Qwen2ForCausalLM", 32768, std::nullopt, std::nullopt, std::nullopt};
  return {"Qwen3ForCausalLM", 32768, std::nullopt, std::nullopt, 128};
}

// rope_scaling (or v5's rope_parameters, named by `key`): null, {"rope_type"|"type": "default"} or
// the llama3 scheme.
std::optional<RopeScaling> parse_rope_scaling(const json& r, const std::string& ctx, const char* key) {
  if (r.is_null()) return std::nullopt;
  const std::string rctx = ctx + ": " + key;
  if (!r.is_object())
    throw Error(ctx, std::string("field \"") + key + "\": expected null or an object, got " + r.type_name());
  Fields f(r, rctx);
  std::string type = f.has("rope_type") ? f.string("rope_type", "") : f.string("type", "");
  if (type.empty())
    throw Error(rctx, "missing \"rope_type\" (or \"type\")", "supported rope types: default, llama3");
  if (type == "default") return std::nullopt;
  if (type != "llama3")
    throw Error(rctx, "unsupported rope type \"" + type + "\"", "supported rope types: default, llama3");
  RopeScaling s;
  s.rope_type = type;
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"}) f.require(key);
  s.factor = f.number("factor", 1.0);
  s.low_freq_factor = f.number("low_freq_factor", 1.0);
  s.high_freq_factor = f.number("high_freq_factor", 4.0);
  s.original_max_position_embeddings = f.integer("original_max_position_embeddings");
  check(s.factor > 0 && s.high_freq_factor > s.low_freq_factor && s.original_max_position_embeddings > 0,
        rctx, "llama3 needs factor > 0, high_freq_factor > low_freq_factor, original_max_position_embeddings > 0");
  return s;
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

}  // namespace

ModelConfig ModelConfig::from_json(const json& j, const std::string& context) {
  if (!j.is_object()) throw Error(context, std::string("expected a JSON object, got ") + j.type_name());
  Fields f(j, context);
  ModelConfig c;
  f.require("model_type");
  c.model_type = f.string("model_type", "");
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
  check(c.head_dim > 0 && c.head_dim % 2 == 0, context,
        "head_dim " + std::to_string(c.head_dim) + " must be a positive even number (rotary embedding)");
  c.max_position_embeddings = f.integer("max_position_embeddings", d.max_position_embeddings);
  c.rms_norm_eps = f.number("rms_norm_eps", 1e-6);

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

  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  if (c.model_type == "llama") {
    c.attention_bias = f.boolean("attention_bias", false);
    c.mlp_bias = f.boolean("mlp_bias", false);
  } else if (c.model_type == "qwen2") {
    c.attention_bias = true;  // Qwen2 always has q/k/v bias (no o bias)
  } else {
    c.attention_bias = f.boolean("attention_bias", false);
    c.qk_norm = true;
  }
  std::string act = f.string("hidden_act", "silu");
  check(act == "silu", context, "field \"hidden_act\": \"" + act + "\" is not supported, expected \"silu\"");
  if (c.model_type != "llama")
    check(!f.boolean("use_sliding_window", false), context,
          "field \"use_sliding_window\": sliding-window attention is not supported",
          "set use_sliding_window to false (full attention)");

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

json ModelConfig::to_json() const {
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
  j["hidden_act"] = "silu";
  j["hidden_size"] = hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = intermediate_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["num_attention_heads"] = num_attention_heads;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_key_value_heads"] = num_key_value_heads;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  if (rope_scaling) {
    j["rope_scaling"] = {{"rope_type", rope_scaling->rope_type},
                         {"factor", rope_scaling->factor},
                         {"low_freq_factor", rope_scaling->low_freq_factor},
                         {"high_freq_factor", rope_scaling->high_freq_factor},
                         {"original_max_position_embeddings", rope_scaling->original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
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
  } else {
    j["max_window_layers"] = num_hidden_layers;
    j["sliding_window"] = nullptr;
    j["use_sliding_window"] = false;
    if (model_type == "qwen3") {
      j["attention_bias"] = attention_bias;
      j["head_dim"] = head_dim;
    } else if (head_dim != hidden_size / num_attention_heads) {
      j["head_dim"] = head_dim;  // Qwen2Config has no such key unless it differs
    }
  }
  return j;
}

void ModelConfig::save(const std::string& config_json_path) const {
  write_file_atomic(config_json_path, to_json().dump(2) + "\n");
}

}  // namespace grpo::io
