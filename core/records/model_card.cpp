// Model card text and the summary of the run's metrics it quotes.
#include "core/records/model_card.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <deque>
#include <sstream>

#include "core/common/json_fields.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/records/run_dir.h"

namespace grpo::run {
namespace {

using json = nlohmann::json;

std::optional<double> number_at(const json& rec, const char* key) {
  auto it = rec.find(key);
  if (it == rec.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string fixed(double v, int digits = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string or_dash(const std::optional<double>& v) { return v ? fixed(*v) : "n/a"; }

std::string basename_of(const std::string& p) {
  auto s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const auto slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

// A key of the run's config.json as the card shows it: a string as it is, any other value as JSON,
// and a key that is absent as "not recorded". The card states what the run recorded, never a
// default of its own: config.json is the resolved config (every key), so an absent key means a
// config written by another tool or edited by hand, and a default here would be a guess.
std::string shown(const json& cfg, const char* key) {
  const json* v = json_field(cfg, key);
  if (!v) return "not recorded";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

json array_at(const json& cfg, const char* key) {
  const json* v = json_field(cfg, key);
  return v && v->is_array() ? *v : json::array();
}

std::string task_text(const json& cfg) {
  if (json_string(cfg, "task") == "arith")
    return "arithmetic questions from the built-in generator (difficulty " + shown(cfg, "task_difficulty") + ")";
  const std::string train = json_string(cfg, "train_file");
  return train.empty() ? "unknown" : "prompts from `" + basename_of(train) + "`";
}

std::string rewards_text(const json& cfg) {
  const json funcs = array_at(cfg, "reward_funcs");
  const json weights = array_at(cfg, "reward_weights");
  std::vector<std::string> parts;
  for (size_t i = 0; i < funcs.size(); ++i) {
    const json& f = funcs[i];
    std::string name = f.is_string() ? f.get<std::string>() : json_string(f, "name");
    if (name.empty()) name = "?";
    std::string part = "`" + name + "`";
    if (weights.is_array() && i < weights.size() && weights[i].is_number())
      part += " (weight " + json(weights[i]).dump() + ")";
    parts.push_back(part);
  }
  return parts.empty() ? "none recorded" : join(parts, ", ");
}

// A dataset_name the Hub can link: "name" or "org/name" as a repo id looks (a path or a file name
// given instead is a local dataset: no link).
bool looks_like_hub_dataset(const std::string& name) {
  if (name.empty() || name.size() > 200 || name.front() == '.' || name.front() == '/' || name.front() == '~') return false;
  if (std::count(name.begin(), name.end(), '/') > 1) return false;
  for (const char* ext : {".jsonl", ".json", ".csv", ".parquet", ".txt"})
    if (ends_with(name, ext)) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' && c != '/') return false;
  return true;
}

// The YAML front matter the Hub reads: the base model and how this model relates to it
// (base_model_relation: an adapter, or a fine-tune for a merged model), the library that loads
// it, the pipeline, tags, the Hub dataset trained on, and the final greedy eval accuracy as a
// model-index result (the Hub shows it on the model page).
std::string front_matter(const ModelCardInput& in) {
  const json& cfg = in.run_config;
  std::ostringstream o;
  o << "---\n";
  if (!in.base_model.empty()) o << "base_model: " << yaml_quote(in.base_model) << "\n";
  o << "library_name: " << (in.merged ? "transformers" : "peft") << "\n";
  o << "pipeline_tag: text-generation\n";
  if (!in.base_model.empty()) o << "base_model_relation: " << (in.merged ? "finetune" : "adapter") << "\n";
  o << "tags:\n";
  for (const char* tag : {"grpo", "reinforcement-learning", "lora", "grpo-studio"}) o << "- " << tag << "\n";
  if (!in.merged) o << "- " << "peft" << "\n";
  const std::string dataset = json_string(cfg, "dataset_name");
  const std::string task = json_string(cfg, "task").empty() ? std::string("custom") : json_string(cfg, "task");
  if (looks_like_hub_dataset(dataset)) o << "datasets:\n- " << yaml_quote(dataset) << "\n";
  if (in.metrics.final_eval_accuracy) {
    const std::string title = basename_of(in.base_model.empty() ? "model" : in.base_model);
    o << "model-index:\n- name: " << yaml_quote(title + (in.merged ? "-grpo-merged" : "-grpo-lora")) << "\n"
      << "  results:\n  - task:\n      type: text-generation\n      name: Text Generation\n"
      << "    dataset:\n      name: " << yaml_quote(looks_like_hub_dataset(dataset) ? dataset : task_text(cfg)) << "\n"
      << "      type: " << yaml_quote(looks_like_hub_dataset(dataset) ? dataset : task) << "\n"
      << "    metrics:\n    - type: accuracy\n      value: " << fixed(*in.metrics.final_eval_accuracy) << "\n"
      << "      name: eval accuracy (greedy, held-out split, step " << in.metrics.steps << ")\n";
  }
  o << "---\n";
  return o.str();
}

}  // namespace

std::string yaml_quote(const std::string& s) { return json(s).dump(); }

MetricsSummary summarize_metrics(const std::string& run_dir, std::optional<int64_t> max_step,
                                 std::optional<int64_t> max_version) {
  MetricsSummary m;
  const RunFolder run(run_dir);
  const std::string path = run.metrics_path();
  std::deque<double> last;
  for (const auto& line : RunFolder::read_jsonl(path).lines) {  // absent: none; a torn last line waits
    const json& rec = line.record;
    check(line.well_formed() && rec.contains("step") && rec["step"].is_number_integer(),
          path + ":" + std::to_string(line.number), "expected a JSON object with an integer \"step\"");
    const int64_t step = rec["step"].get<int64_t>();
    if (max_step && step > *max_step) continue;
    if (max_version && number_at(rec, "policy_version").value_or(0) > static_cast<double>(*max_version)) continue;
    m.steps = std::max(m.steps, step);
    if (auto r = number_at(rec, "reward")) {
      if (!m.first_reward) m.first_reward = r;
      m.final_reward = r;
      last.push_back(*r);
      if (last.size() > 10) last.pop_front();
    }
    if (auto a = number_at(rec, "eval/accuracy")) {
      m.final_eval_accuracy = a;
      if (!m.best_eval_accuracy || *a > *m.best_eval_accuracy) {
        m.best_eval_accuracy = a;
        m.best_eval_step = step;
      }
    }
  }
  if (!last.empty()) {
    double s = 0;
    for (double v : last) s += v;
    m.mean_reward_last = s / static_cast<double>(last.size());
    m.mean_reward_steps = static_cast<int64_t>(last.size());
  }
  return m;
}

// The importance ratio and TRL's off-policy knobs, as set: the level always, the rest when on.
static std::string policy_text(const json& cfg) {
  std::string out = "importance_sampling_level " + shown(cfg, "importance_sampling_level");
  auto on = [&](const char* key) {
    const json* v = json_field(cfg, key);
    return v && !v->is_null() && *v != false;
  };
  if (on("delta")) out += ", delta " + shown(cfg, "delta");
  if (on("vllm_importance_sampling_correction"))
    out += ", proximal-policy correction " + shown(cfg, "vllm_importance_sampling_mode") + " in [" +
           (on("vllm_importance_sampling_clip_min") ? shown(cfg, "vllm_importance_sampling_clip_min") : std::string("0")) +
           ", " + (on("vllm_importance_sampling_clip_max") ? shown(cfg, "vllm_importance_sampling_clip_max") : std::string("inf")) + "]";
  else
    out += ", ratio against the sampler's log-probs";
  if (on("off_policy_mask_threshold")) out += ", off_policy_mask_threshold " + shown(cfg, "off_policy_mask_threshold");
  if (const json* q = json_field(cfg, "top_entropy_quantile"); q && q->is_number() && q->get<double>() < 1.0)
    out += ", top_entropy_quantile " + shown(cfg, "top_entropy_quantile");
  if (on("use_adaptive_entropy")) out += ", adaptive entropy bonus (target " + shown(cfg, "entropy_target") + ")";
  else if (const json* e = json_field(cfg, "entropy_coef"); e && e->is_number() && e->get<double>() != 0.0)
    out += ", entropy_coef " + shown(cfg, "entropy_coef");
  if (const json* n = json_field(cfg, "num_iterations"); n && n->is_number() && n->get<double>() > 1.0)
    out += "; " + shown(cfg, "num_iterations") + " optimizer steps per batch (num_iterations)";
  if (const json* m = json_field(cfg, "max_staleness"); m && m->is_number()) out += "; max_staleness " + shown(cfg, "max_staleness");
  return out;
}

std::string model_card(const ModelCardInput& in) {
  const json& cfg = in.run_config;
  std::ostringstream o;
  o << front_matter(in) << "\n";

  // ---- body ----
  const std::string title = basename_of(in.base_model.empty() ? "model" : in.base_model);
  o << "# " << title << (in.merged ? " + GRPO LoRA (merged)" : " GRPO LoRA adapter") << "\n\n";
  o << (in.merged ? "A full model: the base model with a LoRA adapter merged into its weights"
                  : "A LoRA adapter (Hugging Face PEFT format)")
    << ", trained with asynchronous GRPO by GRPO Studio" << (in.version.empty() ? "" : " " + in.version) << " ("
    << in.source << ").\n\n";

  o << "## Training\n\n";
  o << "| | |\n|---|---|\n";
  o << "| base model | `" << in.base_model << "` |\n";
  o << "| task | " << task_text(cfg) << " |\n";
  o << "| rewards | " << rewards_text(cfg) << " |\n";
  o << "| steps | " << in.metrics.steps << " |\n";
  const json* rslora = json_field(cfg, "use_rslora");
  o << "| LoRA | r " << shown(cfg, "r") << ", lora_alpha " << shown(cfg, "lora_alpha") << ", target_modules "
    << shown(cfg, "target_modules") << (rslora && *rslora == true ? ", rsLoRA" : "") << " |\n";
  o << "| loss | " << shown(cfg, "loss_type") << ", epsilon " << shown(cfg, "epsilon") << ", epsilon_high "
    << shown(cfg, "epsilon_high") << ", beta " << shown(cfg, "beta") << " |\n";
  o << "| policy loss | " << policy_text(cfg) << " |\n";
  o << "| optimizer | AdamW, learning_rate " << shown(cfg, "learning_rate") << " (" << shown(cfg, "lr_scheduler_type")
    << ") |\n";
  o << "| group size | " << shown(cfg, "num_generations") << " completions per prompt |\n";
  o << "| tensor dtype | " << in.dtype << " |\n\n";

  o << "## Results\n\n";
  o << "From `" << RunFolder::kMetricsFile << "` of the run, up to step " << in.metrics.steps << ":\n\n";
  o << "| metric | value |\n|---|---|\n";
  o << "| reward, first step | " << or_dash(in.metrics.first_reward) << " |\n";
  o << "| reward, final step | " << or_dash(in.metrics.final_reward) << " |\n";
  o << "| reward, mean of the last " << in.metrics.mean_reward_steps << " steps | " << or_dash(in.metrics.mean_reward_last)
    << " |\n";
  o << "| eval accuracy (greedy), final | " << or_dash(in.metrics.final_eval_accuracy) << " |\n";
  o << "| eval accuracy (greedy), best | " << or_dash(in.metrics.best_eval_accuracy)
    << (in.metrics.best_eval_accuracy ? " (step " + std::to_string(in.metrics.best_eval_step) + ")" : "") << " |\n\n";
  o << "Rewards are sampled at the run's temperature; eval accuracy is greedy decoding on the held-out split.\n\n";

  o << "## Usage\n\n```python\n";
  if (in.merged) {
    o << "from transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
      << "model = AutoModelForCausalLM.from_pretrained(\"path/to/this/folder\")\n"
      << "tokenizer = AutoTokenizer.from_pretrained(\"path/to/this/folder\")\n";
  } else {
    o << "from peft import PeftModel\nfrom transformers import AutoModelForCausalLM\n\n"
      << "base = AutoModelForCausalLM.from_pretrained(" << yaml_quote(in.base_model) << ")\n"
      << "model = PeftModel.from_pretrained(base, \"path/to/this/folder\")\n";
  }
  o << "```\n\n";
  if (!in.merged) {
    const json* r = json_field(cfg, "r");
    const int64_t rank = r && r->is_number_integer() ? vllm_max_lora_rank(r->get<int64_t>()) : 0;
    o << "vLLM: `vllm serve <base> --enable-lora --max-lora-rank "
      << (rank > 0 ? std::to_string(rank) : std::string("<the adapter's r, rounded up to a size vLLM allows>"))
      << "` then `POST /v1/load_lora_adapter` with this folder, or `--lora-modules name=path/to/this/folder`.\n\n";
  }

  o << "## Run config\n\nThe exact `" << RunFolder::kConfigFile << "` of the run (TRL key names):\n\n```json\n"
    << cfg.dump(2) << "\n```\n";
  return o.str();
}

int64_t vllm_max_lora_rank(int64_t r) {
  for (int64_t v : {1, 8, 16, 32, 64, 128, 256, 320, 512})
    if (r <= v) return v;
  return 0;
}

}  // namespace grpo::run
