// export_run: pick the adapter (a published version, a checkpoint, or the newest), check it,
// and write a PEFT adapter folder or a merged Hugging Face model into a temporary sibling of the
// output directory that is renamed into place when complete.
#include "core/run/export.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>
#include <unistd.h>

#include <torch/torch.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/json_fields.h"
#include "core/common/log.h"
#include "core/common/strings.h"
#include "core/grpo/config.h"
#include "core/hub/hf_cache.h"
#include "core/io/safetensors.h"
#include "core/model/peft_io.h"
#include "core/model/weights.h"
#include "core/records/model_card.h"
#include "core/records/run_dir.h"

namespace fs = std::filesystem;

namespace grpo::run {
namespace {

using json = nlohmann::json;

std::string list_text(const std::vector<int64_t>& v, std::string (*name)(int64_t)) {
  if (v.empty()) return "none";
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(name ? name(x) : std::to_string(x));
  return join(parts, ", ");
}

struct Source {
  std::string dir;    // holds adapter_config.json + adapter_model.safetensors
  std::string label;  // policy-v3 | step-20 | adapter
  std::optional<int64_t> version, step;
};

// The adapter files of `s.dir` are there and match its SHA256SUMS (a checkpoint's).
void check_source_files(const Source& s) {
  for (const char* f : {model::kAdapterConfigName, model::kAdapterWeightsName})
    check(file_exists(path_join(s.dir, f)), s.dir, std::string("missing ") + f, "the run directory is incomplete");
  if (file_exists(path_join(s.dir, "SHA256SUMS"))) {
    const auto bad = verify_sha256sums(s.dir);
    check(bad.empty(), s.dir, "files do not match SHA256SUMS: " + join(bad, ", "),
          "the adapter was modified or torn; export another version");
  }
}

Source resolve_source(const ExportOptions& o) {
  check(!(o.version && o.checkpoint_step), "export", "give either a version or a checkpoint step, not both");
  Source s;
  if (!o.source_dir.empty()) {  // a copy of one of the run's adapters, named by version or step
    s.version = o.version;
    s.step = o.checkpoint_step;
    s.label = s.version ? RunFolder::adapter_name(*s.version) : s.step ? RunFolder::checkpoint_name(*s.step) : "adapter";
    s.dir = o.source_dir;
    check_source_files(s);
    return s;
  }
  const RunFolder run = RunFolder::open_existing(o.run_dir);
  const auto versions = run.adapter_versions();
  const auto steps = run.checkpoint_steps();
  const std::string available =
      "published versions: " + list_text(versions, nullptr) + "; checkpoints: " + list_text(steps, &RunFolder::checkpoint_name);
  if (!o.version && !o.checkpoint_step && !versions.empty()) s.version = versions.back();
  else if (!o.version && !o.checkpoint_step && !steps.empty()) s.step = steps.back();
  if (o.version) {
    s.version = o.version;
    check(std::count(versions.begin(), versions.end(), *o.version) > 0, o.run_dir,
          "version " + std::to_string(*o.version) + " is not in adapters/ (old versions are deleted as training moves on)",
          available);
  } else if (o.checkpoint_step) {
    s.step = o.checkpoint_step;
    check(std::count(steps.begin(), steps.end(), *o.checkpoint_step) > 0, o.run_dir,
          "checkpoint step " + std::to_string(*o.checkpoint_step) + " is not in checkpoints/", available);
  }
  if (s.version) {
    s.label = RunFolder::adapter_name(*s.version);
    s.dir = run.adapter_dir(*s.version);
  } else if (s.step) {
    s.label = RunFolder::checkpoint_name(*s.step);
    s.dir = run.checkpoint_dir(*s.step);
  } else {
    s.label = "adapter";
    s.dir = run.path("adapter");
    check(is_directory(s.dir), o.run_dir, "no adapter to export: adapters/, checkpoints/ and adapter/ are empty",
          "is this a run directory? (grpo train --output DIR makes one)");
  }
  check_source_files(s);
  return s;
}

json read_json(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw Error(path, std::string("invalid JSON: ") + e.what());
  }
}

torch::Dtype export_dtype(const std::string& name) {
  if (name == "f32" || name == "float32") return torch::kFloat32;
  if (name == "bf16" || name == "bfloat16") return torch::kBFloat16;
  if (name == "f16" || name == "float16") return torch::kFloat16;
  throw Error("--dtype", "unknown dtype \"" + name + "\"", "use f32, bf16 or f16");
}

// Tensors kept alive while their bytes are written.
struct Staged {
  std::vector<torch::Tensor> keep;
  std::vector<io::TensorView> views;
  uint64_t bytes = 0;
  void add(const std::string& name, const torch::Tensor& t) {
    auto c = t.contiguous();
    keep.push_back(c);
    const uint64_t n = static_cast<uint64_t>(c.numel() * c.element_size());
    views.push_back({name, model::safetensors_dtype_of(c.scalar_type()), c.sizes().vec(), c.data_ptr(), n});
    bytes += n;
  }
};

// The PEFT key of a LoRA factor on a decoder projection, Phi-3's fused ones included
// (docs/formats.md, "Tensor names").
const std::regex& peft_key_pattern() {
  static const std::regex re(
      R"(base_model\.model\.model\.layers\.(\d+)\.(self_attn\.(q|k|v|o|qkv)_proj|mlp\.(gate|up|down|gate_up)_proj)\.lora_(A|B)\.weight)");
  return re;
}

// Expected [rows, cols] of a LoRA factor from the base config.
std::vector<int64_t> expected_shape(const io::ModelConfig& c, const std::string& module, bool is_a, int64_t r) {
  int64_t in = c.hidden_size, out = c.hidden_size;
  if (module == "self_attn.q_proj") out = c.q_dim();
  else if (module == "self_attn.qkv_proj") out = c.q_dim() + 2 * c.kv_dim();
  else if (module == "mlp.gate_up_proj") out = 2 * c.intermediate_size;
  else if (module == "self_attn.k_proj" || module == "self_attn.v_proj") out = c.kv_dim();
  else if (module == "self_attn.o_proj") in = c.q_dim();
  else if (module == "mlp.gate_proj" || module == "mlp.up_proj") out = c.intermediate_size;
  else if (module == "mlp.down_proj") in = c.intermediate_size;
  return is_a ? std::vector<int64_t>{r, in} : std::vector<int64_t>{out, r};
}

std::vector<std::string> export_peft(const Source& src, const std::string& out, const std::string& base_dir,
                                     const std::string& base_name, torch::Dtype dt) {
  const model::LoraConfig lora = model::read_adapter_config(src.dir);
  auto file = io::SafetensorsFile::open(path_join(src.dir, model::kAdapterWeightsName));
  std::optional<io::ModelConfig> base;
  if (file_exists(path_join(base_dir, "config.json"))) base = io::ModelConfig::load(path_join(base_dir, "config.json"));
  else log_warn(base_dir + ": base model not found; LoRA shapes are not checked against it");

  Staged staged;
  std::set<std::string> modules;  // full module names, e.g. model.layers.0.self_attn.q_proj
  int64_t layers_seen = 0;
  std::set<std::string> saved;  // modules_to_save tensors present
  for (const auto& name : file.names()) {
    const auto& info = file.at(name);
    // modules_to_save: a whole lm_head / embed_tokens, (vocab, hidden), as PEFT names it.
    bool whole = false;
    for (const auto& mod : model::saveable_modules())
      if (name == model::peft_saved_module_key(mod) && lora.saves_module(mod)) {
        if (base) {
          const std::vector<int64_t> want = {base->vocab_size, base->hidden_size};
          check(info.shape == want, file.path(),
                "tensor " + name + ": shape " + io::format_shape(info.shape) + ", expected " + io::format_shape(want),
                "adapter trained for another base model?");
        }
        saved.insert(mod);
        whole = true;
      }
    if (whole) {
      staged.add(name, model::read_tensor(file, info).to(dt));
      continue;
    }
    std::smatch m;
    check(std::regex_match(name, m, peft_key_pattern()), file.path(), "tensor " + name + " is not a PEFT LoRA key",
          "expected base_model.model.model.layers.<L>.<self_attn|mlp>.<proj>.lora_<A|B>.weight" +
              std::string(lora.modules_to_save.empty() ? "" : ", or the whole lm_head / embed_tokens modules_to_save names"));
    const std::string module = m[2].str();
    const std::string full = "model.layers." + m[1].str() + "." + module;
    modules.insert(full);
    layers_seen = std::max<int64_t>(layers_seen, std::stoll(m[1].str()) + 1);
    // The module's own rank (rank_pattern) and whether the plan adapts it at all (layer subsets, regex).
    const auto target = lora.target_for(full);
    check(target.has_value(), file.path(), "tensor " + name + ": adapter_config.json does not adapt " + full,
          "adapter_config.json and adapter_model.safetensors do not belong together");
    if (base) {
      const auto want = expected_shape(*base, module, m[5].str() == "A", target->r);
      check(info.shape == want, file.path(),
            "tensor " + name + ": shape " + io::format_shape(info.shape) + ", expected " + io::format_shape(want),
            "adapter trained for another base model?");
      check(std::stoll(m[1].str()) < base->num_hidden_layers, file.path(), "tensor " + name + ": no such layer",
            "adapter trained for another base model?");
    }
    staged.add(name, model::read_tensor(file, info).to(dt));
  }
  // Every module the plan adapts must be in the file (all layers of the base; without the base,
  // the layers the file shows).
  const int64_t layers = base ? base->num_hidden_layers : layers_seen;
  // Phi-3's fused projections, from the base or (without it) from the file's own names.
  const bool fused = base ? base->fused_qkv : std::any_of(modules.begin(), modules.end(), [](const std::string& m) {
    return ends_with(m, ".qkv_proj") || ends_with(m, ".gate_up_proj");
  });
  std::vector<std::string> missing;
  for (int64_t l = 0; l < layers; ++l)
    for (const auto& p : model::projection_names()) {
      if (!model::family_has_projection(p, fused)) continue;
      const std::string full = "model.layers." + std::to_string(l) + "." +
                               (p == "gate_proj" || p == "up_proj" || p == "down_proj" || p == "gate_up_proj" ? "mlp." : "self_attn.") + p;
      if (lora.target_for(full) && !modules.count(full)) missing.push_back(full);
    }
  for (const auto& mod : model::saveable_modules())
    if (lora.saves_module(mod) && !saved.count(mod)) missing.push_back(mod + " (modules_to_save)");
  check(missing.empty(), file.path(),
        "adapter_config.json adapts " + (missing.empty() ? std::string() : missing[0]) +
            (missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : std::string()) +
            " but the file has no tensors for it");

  io::write_safetensors(path_join(out, model::kAdapterWeightsName), staged.views, {{"format", "pt"}});
  write_file_atomic(path_join(out, model::kAdapterConfigName),
                    model::adapter_config_json(lora, base_name, fused).dump(2) + "\n");
  return {model::kAdapterConfigName, model::kAdapterWeightsName};
}

std::vector<std::string> export_merged(const Source& src, const std::string& out, const std::string& base_dir,
                                       torch::Dtype dt, int64_t max_shard_bytes) {
  check(is_directory(base_dir), base_dir, "base model directory not found",
        "the merged export needs the run's model_name_or_path");
  check(max_shard_bytes > 0, "--max-shard-size", "must be positive");
  auto model = model::from_pretrained(base_dir, torch::kFloat32, torch::kCPU);
  model::load_adapter(*model, src.dir);
  model->merge_adapter();  // W += scaling * B A, in float32

  // Shards in parameter order, each closed before it would pass max_shard_bytes (a tensor larger
  // than the limit gets a shard of its own), as transformers' save_pretrained splits them.
  // modules_to_save replace their base modules. A tied base whose adapter saved either one comes
  // out untied (PEFT's copy does not follow the tie): its own lm_head.weight, tie_word_embeddings false.
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : model->named_base_parameters()) {
    auto t = item.value();
    for (const auto& mod : model->saved_modules())
      if (item.key() == mod + ".weight") t = model->saved_module(mod);
    tensors.emplace_back(item.key(), t);
  }
  const bool untie = model->tied() && !model->saved_modules().empty();
  if (untie) {
    auto head = model->saved_module("lm_head");
    tensors.emplace_back("lm_head.weight", head.defined() ? head : model->model->embed_tokens->weight);
  }
  std::vector<Staged> shards(1);
  for (const auto& item : tensors) {
    auto t = item.second.detach().to(torch::kCPU, dt);
    const uint64_t n = static_cast<uint64_t>(t.numel() * t.element_size());
    if (!shards.back().views.empty() && shards.back().bytes + n > static_cast<uint64_t>(max_shard_bytes))
      shards.emplace_back();
    shards.back().add(item.first, t);
  }
  std::vector<std::string> files;
  if (shards.size() == 1) {
    io::write_safetensors(path_join(out, "model.safetensors"), shards[0].views, {{"format", "pt"}});
    files.push_back("model.safetensors");
  } else {
    json weight_map = json::object();
    uint64_t total = 0;
    const size_t count = shards.size();
    for (size_t i = 0; i < count; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, count);
      io::write_safetensors(path_join(out, name), shards[i].views, {{"format", "pt"}});
      for (const auto& v : shards[i].views) weight_map[v.name] = name;
      total += shards[i].bytes;
      files.push_back(name);
    }
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic(path_join(out, "model.safetensors.index.json"), index.dump(2) + "\n");
    files.push_back("model.safetensors.index.json");
  }
  // config.json: the base's own file (every key it had), with the dtype of the written tensors.
  json cfg = read_json(path_join(base_dir, "config.json"));
  cfg["torch_dtype"] = model::hf_dtype_name(dt);
  if (untie) cfg["tie_word_embeddings"] = false;
  write_file_atomic(path_join(out, "config.json"), cfg.dump(2) + "\n");
  files.push_back("config.json");
  for (const char* f : {"generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        "added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja",
                        "chat_template.json"}) {
    const std::string from = path_join(base_dir, f);
    if (!file_exists(from)) continue;
    write_file_atomic(path_join(out, f), read_file(from));
    files.push_back(f);
  }
  return files;
}

const char* safetensors_name(torch::Dtype dt) { return io::dtype_name(model::safetensors_dtype_of(dt)); }

}  // namespace

std::vector<std::string> vllm_adapter_problems(const std::string& dir) {
  std::vector<std::string> problems;
  const json c = read_json(path_join(dir, model::kAdapterConfigName));
  auto field = [&](const char* k) -> json { return c.contains(k) ? c[k] : json(); };
  for (const char* k : {"r", "lora_alpha", "target_modules"})
    if (field(k).is_null()) problems.push_back(std::string(k) + " is missing");
  if (!field("bias").is_null() && field("bias") != "none") problems.push_back("bias is " + field("bias").dump() + ", not \"none\"");
  const json mts = field("modules_to_save");
  if (!mts.is_null() && !(mts.is_array() && mts.empty())) problems.push_back("modules_to_save is set");
  for (const char* k : {"use_dora", "lora_bias"})
    if (field(k) == true) problems.push_back(std::string(k) + " is true");
  for (const char* k : {"alora_invocation_tokens", "layer_replication"})
    if (!field(k).is_null()) problems.push_back(std::string(k) + " is set");
  if (!field("init_lora_weights").is_null() && field("init_lora_weights") != true)
    problems.push_back("init_lora_weights is " + field("init_lora_weights").dump());
  if (field("r").is_number_integer() && vllm_max_lora_rank(field("r").get<int64_t>()) == 0)
    problems.push_back("r " + field("r").dump() + " is above vLLM's largest --max-lora-rank (512)");
  const json rank_pattern = field("rank_pattern");  // a named value: items() of a temporary dangles
  if (rank_pattern.is_object())
    for (const auto& [k, v] : rank_pattern.items())
      if (v.is_number_integer() && vllm_max_lora_rank(v.get<int64_t>()) == 0)
        problems.push_back("rank_pattern '" + k + "': r " + v.dump() + " is above vLLM's largest --max-lora-rank (512)");
  auto file = io::SafetensorsFile::open(path_join(dir, model::kAdapterWeightsName));
  for (const auto& t : file.tensors()) {
    if (!ends_with(t.name, ".lora_A.weight") && !ends_with(t.name, ".lora_B.weight"))
      problems.push_back("tensor " + t.name + " is not a lora_A/lora_B weight");
    if (t.name.find("embed_tokens") != std::string::npos || t.name.find("lm_head") != std::string::npos)
      problems.push_back("tensor " + t.name + " adapts embeddings or lm_head");
    if (t.dtype != io::DType::F32 && t.dtype != io::DType::BF16 && t.dtype != io::DType::F16)
      problems.push_back("tensor " + t.name + " has dtype " + io::dtype_name(t.dtype));
  }
  return problems;
}

ExportResult export_run(const ExportOptions& o) {
  check(!o.run_dir.empty(), "export", "no run directory given");
  const RunFolder run = RunFolder::open_existing(o.run_dir);
  check(run.has_config(), o.run_dir, std::string("no ") + RunFolder::kConfigFile + " here",
        "give the directory a run was trained into (grpo train --output DIR)");
  const torch::Dtype dt = export_dtype(o.dtype);
  const json run_config = run.read_config();
  // Read back through the key table: a mistyped value is an error naming the file and the key.
  auto recorded = [&](const char* key, const std::string& fallback) {
    const json* v = json_field(run_config, key);
    return v ? grpo::config_string(*grpo::find_config_key(grpo::train_config_schema(), key), *v, run.config_path())
             : fallback;
  };
  const std::string base_id = recorded("model_name_or_path", "");
  check(!base_id.empty(), run.config_path(), "model_name_or_path is missing");
  const Source src = resolve_source(o);
  const std::string base_name = o.base_model_name.empty() ? base_id : o.base_model_name;
  std::string base_dir = base_id;  // a Hub repo id: its cached snapshot at the run's pinned model_revision
  try {
    base_dir = hub::resolve_model_dir(base_id, recorded("model_revision", "main"));
  } catch (const Error&) {  // not found: the checks below say so (a PEFT export can do without it)
  }

  ExportResult result;
  result.out_dir = o.out_dir.empty() ? path_join(path_join(o.run_dir, "export"), src.label + (o.merged ? "-merged" : ""))
                                     : o.out_dir;
  while (result.out_dir.size() > 1 && result.out_dir.back() == '/') result.out_dir.pop_back();
  std::error_code ec;
  if (fs::exists(result.out_dir)) {
    check(fs::is_directory(result.out_dir) && fs::is_empty(result.out_dir), result.out_dir,
          "exists and is not an empty directory", "choose another output directory or delete this one");
  }
  const fs::path out_path(result.out_dir);
  if (out_path.has_parent_path()) fs::create_directories(out_path.parent_path(), ec);
  const std::string tmp = result.out_dir + ".tmp-export-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  check(!ec, tmp, "cannot create directory: " + ec.message());
  try {
    result.files = o.merged ? export_merged(src, tmp, base_dir, dt, o.max_shard_bytes)
                            : export_peft(src, tmp, base_dir, base_name, dt);
    if (!o.merged) {
      // An adapter that carries whole modules (modules_to_save) is PEFT's to load, not vLLM's:
      // exported with a warning. Anything else vLLM would refuse stops the export.
      const bool saves_modules = !model::read_adapter_config(tmp).modules_to_save.empty();
      std::vector<std::string> problems, warnings;
      for (const auto& p : vllm_adapter_problems(tmp)) {
        const auto& mods = model::saveable_modules();
        const bool from_saved = p == "modules_to_save is set" || std::any_of(mods.begin(), mods.end(), [&](const std::string& m) {
                                  return p.find(model::peft_saved_module_key(m)) != std::string::npos;
                                });
        (saves_modules && from_saved ? warnings : problems).push_back(p);
      }
      check(problems.empty(), src.dir, "the exported adapter would be refused by vLLM: " + join(problems, "; "));
      if (!warnings.empty())
        log_warn(src.dir + ": exported for PEFT; vLLM will refuse this adapter (" + join(warnings, "; ") +
                 "): use the merged export (--merged) to serve it with vLLM");
    }
    ModelCardInput card;
    card.merged = o.merged;
    card.base_model = base_name;
    card.source = src.label + " of run " + o.run_dir;
    card.dtype = safetensors_name(dt);
    card.run_config = run_config;
    card.metrics = summarize_metrics(o.run_dir, src.step, src.version);
    write_file_atomic(path_join(tmp, "README.md"), model_card(card));
    result.files.push_back("README.md");
    if (fs::exists(result.out_dir)) fs::remove(result.out_dir);  // empty (checked above)
    fs::rename(tmp, result.out_dir);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw Error(result.out_dir, std::string("cannot write the export: ") + e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  log_info("exported " + src.label + " of " + o.run_dir + " to " + result.out_dir);
  return result;
}

}  // namespace grpo::run
