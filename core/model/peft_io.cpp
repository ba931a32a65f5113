// PEFT adapter_config.json + adapter_model.safetensors, read and write.
#include "core/model/peft_io.h"

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

nlohmann::json adapter_config_json(const LoraConfig& c, const std::string& base) {
  nlohmann::json j = nlohmann::json::object();  // std::map: keys come out sorted
  j["alpha_pattern"] = nlohmann::json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = base;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["layer_replication"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["loftq_config"] = nlohmann::json::object();
  j["lora_alpha"] = number(c.lora_alpha);
  j["lora_dropout"] = c.lora_dropout;
  j["megatron_config"] = nullptr;
  j["megatron_core"] = "megatron.core";
  j["modules_to_save"] = nullptr;
  j["peft_type"] = "LORA";
  j["r"] = c.r;
  j["rank_pattern"] = nlohmann::json::object();
  j["revision"] = nullptr;
  j["target_modules"] = c.resolved_targets();
  j["task_type"] = "CAUSAL_LM";
  j["use_dora"] = false;
  j["use_rslora"] = c.use_rslora;
  return j;
}

static bool empty_like(const nlohmann::json& v) {
  return v.is_null() || (v.is_object() && v.empty()) || (v.is_array() && v.empty()) ||
         (v.is_boolean() && !v.get<bool>());
}

LoraConfig lora_config_from_json(const nlohmann::json& j, const std::string& ctx) {
  check(j.is_object(), ctx, "expected a JSON object");
  auto unsupported = [&](const std::string& key, const std::string& what) {
    throw Error(ctx, key + ": " + what + " is not supported",
                "train the adapter with plain LoRA (bias none, no DoRA, no modules_to_save)");
  };
  auto get = [&](const char* key) -> const nlohmann::json* {
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  };
  if (auto v = get("peft_type"); v && !(v->is_string() && v->get<std::string>() == "LORA"))
    unsupported("peft_type", v->dump());
  if (auto v = get("use_dora"); v && !empty_like(*v)) unsupported("use_dora", "DoRA");
  if (auto v = get("bias"); v && !(v->is_string() && v->get<std::string>() == "none"))
    unsupported("bias", v->dump());
  if (auto v = get("lora_bias"); v && !empty_like(*v)) unsupported("lora_bias", "a bias on lora_B");
  for (const char* key : {"modules_to_save", "rank_pattern", "alpha_pattern", "layers_to_transform",
                          "layer_replication", "trainable_token_indices", "target_parameters"})
    if (auto v = get(key); v && !empty_like(*v)) unsupported(key, v->dump());
  if (auto v = get("fan_in_fan_out"); v && !empty_like(*v)) unsupported("fan_in_fan_out", "true");

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
  if (t->is_string()) {
    c.target_modules = {t->get<std::string>()};
  } else if (t->is_array()) {
    c.target_modules.clear();
    for (const auto& m : *t) c.target_modules.push_back(m.get<std::string>());
  } else {
    throw Error(ctx, "target_modules: expected a list or \"all-linear\"");
  }
  for (const auto& m : c.target_modules)
    if (m == "embed_tokens" || m == "lm_head")
      unsupported("target_modules", "LoRA on " + m);
  c.validate(ctx);
  return c;
}

LoraConfig read_adapter_config(const std::string& dir) {
  auto path = path_join(dir, kAdapterConfigName);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
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
  for (const auto& item : model.named_lora_parameters()) {
    auto t = item.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    keep.push_back(t);
    views.push_back({kPeftKeyPrefix + item.key(), io::DType::F32, t.sizes().vec(), t.data_ptr(),
                     uint64_t(t.numel() * t.element_size())});
  }
  io::write_safetensors(path_join(dir, kAdapterWeightsName), views, {{"format", "pt"}});
  auto name = base.empty() ? model.config().name_or_path : base;
  write_file_atomic(path_join(dir, kAdapterConfigName), adapter_config_json(cfg, name).dump(2) + "\n");
}

namespace {

// Copies every LoRA tensor of `file` into the model's attached adapter (names and shapes checked).
void copy_adapter_tensors(CausalLMImpl& model, const io::SafetensorsFile& file, const std::string& hint) {
  auto params = model.named_lora_parameters();
  std::set<std::string> expected;
  for (const auto& item : params) expected.insert(kPeftKeyPrefix + item.key());
  for (const auto& info : file.tensors())
    if (!expected.count(info.name)) {
      std::vector<std::string> names(expected.begin(), expected.end());
      auto near = nearest_name(info.name, names);
      throw Error(file.path(), "unexpected tensor " + info.name + " (no such LoRA target in the base model)",
                  near.empty() ? hint : hint + " (closest expected name: " + near + ")");
    }
  torch::NoGradGuard no_grad;
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
    check(starts_with(n, kPeftKeyPrefix) && (ends_with(n, ".lora_A.weight") || ends_with(n, ".lora_B.weight")),
          file.path(), "unexpected tensor " + n,
          "only lora_A/lora_B weights are supported (no biases, DoRA magnitudes or modules_to_save)");
  }
  model.add_lora(cfg);
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
  check(cfg.r == mine.r && cfg.resolved_targets() == mine.resolved_targets() && cfg.scaling() == mine.scaling(),
        path_join(dir, kAdapterConfigName),
        "r, lora_alpha or target_modules differ from the attached adapter (r " + std::to_string(cfg.r) + " vs " +
            std::to_string(mine.r) + ")",
        "was this checkpoint written by another run?");
  auto file = io::SafetensorsFile::open(path_join(dir, kAdapterWeightsName));
  copy_adapter_tensors(model, file, "adapter trained for another base model?");
}

}  // namespace grpo::model
