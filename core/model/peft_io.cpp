// PEFT adapter_config.json + adapter_model.safetensors, read and write.
#include "core/common/json_limits.h"
#include "core/model/peft_io.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/io/safetensors.h"
#include "core/model/weights.h"

namespace grpo::model {

static nlohmann::json number(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return nlohmann::json(int64_t(v));
  return nlohmann::json(v);
}

nlohmann::ordered_json adapter_config_json(const LoraConfig& c, const std::string& base, bool fused) {
  // Keys inserted in sorted order, as PEFT's save_pretrained (sort_keys=True) writes them. The
  // pattern objects keep the config's own order instead: PEFT takes the first pattern that
  // matches in file order, so sorting them could hand a module another pattern's rank.
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  nlohmann::ordered_json alpha = nlohmann::ordered_json::object(), rank = nlohmann::ordered_json::object();
  for (const auto& [k, v] : c.alpha_pattern) alpha[k] = nlohmann::ordered_json(number(v));
  for (const auto& [k, v] : c.rank_pattern) rank[k] = v;
  nlohmann::ordered_json layers = nullptr, layers_pattern = nullptr, targets;
  if (!c.layers_to_transform.empty())
    layers = c.layers_to_transform_int && c.layers_to_transform.size() == 1
                 ? nlohmann::ordered_json(c.layers_to_transform[0])
                 : nlohmann::ordered_json(c.layers_to_transform);
  if (!c.layers_pattern.empty())
    layers_pattern = c.layers_pattern_string && c.layers_pattern.size() == 1
                         ? nlohmann::ordered_json(c.layers_pattern[0])
                         : nlohmann::ordered_json(c.layers_pattern);
  if (c.target_regex) {
    targets = c.target_modules.at(0);
  } else if (c.plain() || (c.target_modules.size() == 1 && c.target_modules[0] == "all-linear")) {
    targets = c.resolved_targets(fused);  // PEFT saves "all-linear" expanded
  } else {
    std::set<std::string> uniq(c.target_modules.begin(), c.target_modules.end());  // PEFT keeps a set
    targets = std::vector<std::string>(uniq.begin(), uniq.end());
  }
  j["alpha_pattern"] = alpha;
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = base;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["layer_replication"] = nullptr;
  j["layers_pattern"] = layers_pattern;
  j["layers_to_transform"] = layers;
  j["loftq_config"] = nlohmann::ordered_json::object();
  j["lora_alpha"] = nlohmann::ordered_json(number(c.lora_alpha));
  j["lora_dropout"] = c.lora_dropout;
  j["megatron_config"] = nullptr;
  j["megatron_core"] = "megatron.core";
  j["modules_to_save"] = c.modules_to_save.empty() ? nlohmann::ordered_json(nullptr)
                                                   : nlohmann::ordered_json(c.modules_to_save);
  j["peft_type"] = "LORA";
  j["r"] = c.r;
  j["rank_pattern"] = rank;
  j["revision"] = nullptr;
  j["target_modules"] = targets;
  j["task_type"] = "CAUSAL_LM";
  j["use_dora"] = false;
  j["use_rslora"] = c.use_rslora;
  return j;
}

namespace {

bool empty_like(const nlohmann::ordered_json& v) {
  return v.is_null() || (v.is_object() && v.empty()) || (v.is_array() && v.empty()) ||
         (v.is_boolean() && !v.get<bool>());
}

// PEFT LoraConfig keys we do not implement: loading such an adapter would give other logits than
// PEFT's, so each is refused with its reason (a key that is absent, null, false or empty is fine).
struct Refused {
  const char* key;
  const char* why;
};
const std::vector<Refused>& refused_features() {
  static const std::vector<Refused> r = {
      {"use_dora", "DoRA's magnitude vectors are not implemented"},
      {"bias", "LoRA bias terms (bias other than \"none\") are not implemented"},
      {"lora_bias", "a bias on lora_B is not implemented"},
      {"layer_replication", "layer replication (stacking copies of base layers) is not implemented"},
      {"fan_in_fan_out", "transposed Conv1D-style weights (GPT-2) do not occur in the supported models"},
      {"target_parameters", "LoRA on bare parameters (e.g. MoE expert weights) is not implemented"},
      {"trainable_token_indices", "trainable token embeddings are not implemented"},
      {"exclude_modules", "exclude_modules is not implemented yet"},
      {"alora_invocation_tokens", "activated LoRA (aLoRA) is not implemented"},
      {"use_qalora", "QA-LoRA is not implemented"},
  };
  return r;
}

std::string refused_summary() {
  std::string s = "refused: peft_type other than LORA, LoRA on embed_tokens/lm_head";
  for (const auto& f : refused_features()) s += "; " + std::string(f.key) + " (" + f.why + ")";
  return s + ". Supported: r, lora_alpha, lora_dropout, use_rslora, target_modules (list, \"all-linear\" or a "
             "regex), rank_pattern, alpha_pattern, layers_to_transform, layers_pattern, modules_to_save (lm_head, "
             "embed_tokens)";
}

}  // namespace

LoraConfig lora_config_from_json(const nlohmann::json& j, const std::string& ctx) {
  return lora_config_from_json(nlohmann::ordered_json(j), ctx);
}

LoraConfig lora_config_from_json(const nlohmann::ordered_json& j, const std::string& ctx) {
  using ojson = nlohmann::ordered_json;
  check(j.is_object(), ctx, "expected a JSON object");
  auto refuse = [&](const std::string& key, const std::string& value, const std::string& why) {
    throw Error(ctx, key + ": " + value + " is not supported: " + why, refused_summary());
  };
  auto get = [&](const char* key) -> const ojson* {
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  };
  auto bad = [&](const std::string& key, const std::string& what, const ojson& v) {
    std::string d = v.dump();
    if (d.size() > 200) d = d.substr(0, 200) + "...";
    throw Error(ctx, key + ": " + what + ", got " + d);
  };
  auto bounded = [&](const char* key, const ojson& v) {
    if ((v.is_array() || v.is_object()) && v.size() > kMaxLoraPatternCount)
      throw Error(ctx, std::string(key) + ": " + std::to_string(v.size()) + " entries, more than the " +
                           std::to_string(kMaxLoraPatternCount) + " we accept");
  };
  if (auto v = get("peft_type"); v && !(v->is_string() && v->get<std::string>() == "LORA"))
    refuse("peft_type", v->dump(), "only LoRA adapters are supported");
  for (const auto& f : refused_features()) {
    auto v = get(f.key);
    if (!v) continue;
    if (std::string(f.key) == "bias" ? !(v->is_null() || (v->is_string() && v->get<std::string>() == "none"))
                                     : !empty_like(*v)) {
      std::string d = v->dump();
      refuse(f.key, d.size() > 200 ? d.substr(0, 200) + "..." : d, f.why);
    }
  }

  LoraConfig c;
  try {
    if (auto v = get("r")) c.r = v->get<int64_t>();
    if (auto v = get("lora_alpha")) c.lora_alpha = v->get<double>();
    if (auto v = get("lora_dropout")) c.lora_dropout = v->get<double>();
    if (auto v = get("use_rslora")) c.use_rslora = v->get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(ctx, std::string("bad value: ") + e.what());
  }
  auto t = get("target_modules");
  check(t && !t->is_null(), ctx, "target_modules: missing", "list the adapted projections");
  bounded("target_modules", *t);
  if (t->is_string()) {
    std::string s = t->get<std::string>();
    std::string lower = s;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
    if (lower == "all-linear") {
      c.target_modules = {"all-linear"};
    } else {  // PEFT: any other string is a regex, re.fullmatch'ed against module names
      c.target_modules = {s};
      c.target_regex = true;
    }
  } else if (t->is_array()) {
    c.target_modules.clear();
    for (const auto& m : *t) {
      if (!m.is_string()) bad("target_modules", "expected a list of module names", *t);
      c.target_modules.push_back(m.get<std::string>());
    }
    // PEFT keeps a list as a set (LoraConfig.__post_init__): order and repeats carry no meaning.
    std::sort(c.target_modules.begin(), c.target_modules.end());
    c.target_modules.erase(std::unique(c.target_modules.begin(), c.target_modules.end()), c.target_modules.end());
  } else {
    bad("target_modules", "expected a list of module names, \"all-linear\" or a regex string", *t);
  }
  if (!c.target_regex)
    for (const auto& m : c.target_modules) {
      auto last = m.substr(m.rfind('.') == std::string::npos ? 0 : m.rfind('.') + 1);
      if (last == "embed_tokens" || last == "lm_head")
        refuse("target_modules", "LoRA on " + m, "LoRA on embeddings and lm_head is not implemented");
    }

  if (auto v = get("rank_pattern"); v && !v->is_null()) {
    if (!v->is_object()) bad("rank_pattern", "expected an object {pattern: rank}", *v);
    bounded("rank_pattern", *v);
    for (const auto& [k, val] : v->items()) {  // ordered_json: file order, which PEFT's lookup follows
      if (!val.is_number_integer()) bad("rank_pattern", "the value for '" + k + "' must be an integer rank", val);
      c.rank_pattern.emplace_back(k, val.get<int64_t>());
    }
  }
  if (auto v = get("alpha_pattern"); v && !v->is_null()) {
    if (!v->is_object()) bad("alpha_pattern", "expected an object {pattern: alpha}", *v);
    bounded("alpha_pattern", *v);
    for (const auto& [k, val] : v->items()) {
      if (!val.is_number()) bad("alpha_pattern", "the value for '" + k + "' must be a number", val);
      c.alpha_pattern.emplace_back(k, val.get<double>());
    }
  }
  if (auto v = get("layers_to_transform"); v && !v->is_null()) {
    bounded("layers_to_transform", *v);
    if (v->is_number_integer()) {
      c.layers_to_transform = {v->get<int64_t>()};
      c.layers_to_transform_int = true;
    } else if (v->is_array()) {
      for (const auto& x : *v) {
        if (!x.is_number_integer()) bad("layers_to_transform", "expected an integer or a list of integers", *v);
        c.layers_to_transform.push_back(x.get<int64_t>());
      }
    } else {
      bad("layers_to_transform", "expected an integer or a list of integers", *v);
    }
  }
  if (auto v = get("layers_pattern"); v && !v->is_null()) {
    bounded("layers_pattern", *v);
    if (v->is_string()) {
      if (!v->get<std::string>().empty()) {  // PEFT: an empty layers_pattern means any
        c.layers_pattern = {v->get<std::string>()};
        c.layers_pattern_string = true;
      }
    } else if (v->is_array()) {
      for (const auto& x : *v) {
        if (!x.is_string()) bad("layers_pattern", "expected a string or a list of strings", *v);
        c.layers_pattern.push_back(x.get<std::string>());
      }
    } else {
      bad("layers_pattern", "expected a string or a list of strings", *v);
    }
  }
  if (auto v = get("modules_to_save"); v && !v->is_null()) {
    bounded("modules_to_save", *v);
    if (!v->is_array()) bad("modules_to_save", "expected a list of module names", *v);
    for (const auto& x : *v) {
      if (!x.is_string()) bad("modules_to_save", "expected a list of module names", *v);
      const std::string m = x.get<std::string>();
      if (!supported_module_to_save(m))
        refuse("modules_to_save", x.dump().substr(0, 200),
               "only whole copies of lm_head and embed_tokens are loaded (PEFT matches names as suffixes of module names)");
      c.modules_to_save.push_back(m);
    }
  }
  // PEFT ignores layers_pattern without layers_to_transform (check_target_module_exists only
  // reads it to find the index); drop it so the plan and the written config agree.
  if (c.layers_to_transform.empty()) {
    c.layers_pattern.clear();
    c.layers_pattern_string = false;
  }
  c.validate(ctx);
  return c;
}

LoraConfig read_adapter_config(const std::string& dir) {
  auto path = path_join(dir, kAdapterConfigName);
  nlohmann::ordered_json j;  // file order: rank_pattern / alpha_pattern are searched in it
  try {
    const std::string text = read_file(path);
    check_json_depth(text, path);
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("invalid JSON: ") + e.what());
  }
  return lora_config_from_json(j, path);
}

void save_adapter(const CausalLMImpl& model, const std::string& dir, const std::string& base) {
  const auto& cfg = model.lora_config();
  check(!model.adapter_merged(), dir, "cannot save a merged adapter", "unmerge_adapter() first");
  std::filesystem::create_directories(dir);
  std::vector<torch::Tensor> keep;
  std::vector<io::TensorView> views;
  auto add = [&](const std::string& name, const torch::Tensor& value) {
    auto t = value.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    keep.push_back(t);
    views.push_back({name, io::DType::F32, t.sizes().vec(), t.data_ptr(), uint64_t(t.numel() * t.element_size())});
  };
  for (const auto& item : model.named_lora_parameters()) add(kPeftKeyPrefix + item.key(), item.value());
  // modules_to_save, as PEFT names them: base_model.model.<module>.weight
  for (const auto& module : model.saved_modules()) add(peft_saved_module_key(module), model.saved_module(module));
  io::write_safetensors(path_join(dir, kAdapterWeightsName), views, {{"format", "pt"}});
  auto name = base.empty() ? model.config().name_or_path : base;
  write_file_atomic(path_join(dir, kAdapterConfigName), adapter_config_json(cfg, name, model.config().fused_qkv).dump(2) + "\n");
}

namespace {

// The module a modules_to_save tensor key names ("lm_head", "model.embed_tokens"), or "".
std::string saved_module_of(const std::string& key) {
  for (const auto& m : saveable_modules())
    if (key == peft_saved_module_key(m)) return m;
  return "";
}

// Copies every LoRA tensor of `file` into the model's attached adapter (names and shapes checked),
// and the whole modules the adapter config's modules_to_save names.
void copy_adapter_tensors(CausalLMImpl& model, const io::SafetensorsFile& file, const std::string& hint) {
  auto params = model.named_lora_parameters();
  const auto& cfg = model.lora_config();
  std::set<std::string> expected;
  for (const auto& item : params) expected.insert(kPeftKeyPrefix + item.key());
  for (const auto& m : saveable_modules())
    if (cfg.saves_module(m)) {
      const std::string key = peft_saved_module_key(m);
      check(file.find(key) != nullptr, file.path(), "missing tensor " + key + " (modules_to_save names " + m + ")", hint);
      expected.insert(key);
    }
  for (const auto& info : file.tensors())
    if (!expected.count(info.name)) {
      std::vector<std::string> names(expected.begin(), expected.end());
      auto near = nearest_name(info.name, names);
      throw Error(file.path(), "unexpected tensor " + info.name + " (no such LoRA target in the base model)",
                  near.empty() ? hint : hint + " (closest expected name: " + near + ")");
    }
  torch::NoGradGuard no_grad;
  for (const auto& info : file.tensors())
    if (auto m = saved_module_of(info.name); !m.empty()) {
      try {
        model.set_saved_module(m, read_tensor(file, info));
      } catch (const Error& e) {
        throw e.within(file.path());
      }
    }
  for (auto& item : params) {
    const auto name = kPeftKeyPrefix + item.key();
    const auto* info = file.find(name);
    if (!info) throw Error(file.path(), "missing tensor " + name + " (target_modules says it is adapted)", hint);
    if (info->shape != item.value().sizes().vec())
      throw Error(file.path(),
                  "tensor " + name + ": shape " + shape_string(info->shape) + ", expected " +
                      shape_string(item.value().sizes()),
                  hint);
    item.value().copy_(read_tensor(file, *info));
  }
}

}  // namespace

void load_adapter(CausalLMImpl& model, const std::string& dir) {
  const std::string hint = "adapter trained for another base model?";
  auto cfg = read_adapter_config(dir);
  auto file = io::SafetensorsFile::open(path_join(dir, kAdapterWeightsName));
  // Check names before touching the model, so a bad adapter leaves it unchanged.
  for (const auto& info : file.tensors()) {
    const auto& n = info.name;
    check(n.find("lora_embedding_") == std::string::npos, file.path(),
          "tensor " + n + ": LoRA on embeddings is not supported");
    const auto saved = saved_module_of(n);
    check(starts_with(n, kPeftKeyPrefix) &&
              (ends_with(n, ".lora_A.weight") || ends_with(n, ".lora_B.weight") || (!saved.empty() && cfg.saves_module(saved))),
          file.path(), "unexpected tensor " + n,
          "only lora_A/lora_B weights and the modules modules_to_save names are supported (no biases or DoRA magnitudes)");
  }
  try {
    model.add_lora(cfg);  // the plan: target_for on every module name
  } catch (const Error& e) {
    throw e.within(path_join(dir, kAdapterConfigName));
  }
  try {
    copy_adapter_tensors(model, file, hint);
  } catch (...) {
    model.remove_lora();
    throw;
  }
}

void load_adapter_weights(CausalLMImpl& model, const std::string& dir) {
  check(model.has_lora(), dir, "the model has no adapter to load weights into");
  auto cfg = read_adapter_config(dir);
  const auto& mine = model.lora_config();
  // The whole per-module plan must agree (which modules, each one's r and scaling), not just the
  // defaults: patterns and layer subsets change it module by module.
  auto describe = [](const std::optional<LoraConfig::Target>& t) {
    return t ? "r " + std::to_string(t->r) + ", scaling " + std::to_string(t->scaling) : std::string("no adapter");
  };
  for (const auto& [name, lin] : model.linear_layers()) {
    auto theirs = cfg.target_for(name), ours = mine.target_for(name);
    check(theirs == ours, path_join(dir, kAdapterConfigName),
          "module " + name + ": " + describe(theirs) + " here, " + describe(ours) + " in the attached adapter",
          "was this checkpoint written by another run?");
  }
  check(cfg.modules_to_save == mine.modules_to_save, path_join(dir, kAdapterConfigName),
        "modules_to_save differs from the attached adapter's", "was this checkpoint written by another run?");
  auto file = io::SafetensorsFile::open(path_join(dir, kAdapterWeightsName));
  copy_adapter_tensors(model, file, "adapter trained for another base model?");
}

}  // namespace grpo::model
