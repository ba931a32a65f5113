// SftConfig's key table (sft_config.h): one row per key, under its group, with its range and doc;
// defaults are the struct's own initialisers.
#include "core/run/sft_config.h"

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/grpo/config.h"
#include "core/grpo/choices.h"
#include "core/grpo/config_table.h"
#include "core/grpo/shared_ranges.h"

namespace grpo::run {
namespace {

using nlohmann::json;
using namespace ::grpo::grpo;  // ConfigTable, ranges

const ConfigTable<SftConfig>& table() {
  using S = SftConfig;
  static const ConfigTable<SftConfig> t({
      {"model and data",
       {{"model_name_or_path", &S::model_name_or_path, {}, "A Hugging Face model folder, or a Hub repo id in the Hugging Face cache."},
        {"train_file", &S::train_file, {}, "JSONL pairs {\"prompt\", \"completion\"} or chat \"messages\" (or task: arith)."},
        {"task", &S::task, one_of({"", "arith"}), "A built-in task instead of a file: \"arith\" (completion = the answer)."},
        {"task_difficulty", &S::task_difficulty, closed(1, 5), "Built-in arithmetic: 1 = one digit +-, ... 5 = up to four digits, three terms."},
        {"eval_size", &S::eval_size, shared_range::eval_size(), "Built-in arithmetic: held-out problems (the split `grpo train` uses)."},
        {"output_dir", &S::output_dir, {}, "Where the checkpoint or adapter is written."},
        {"save_format", &S::save_format, one_of(grpo::kSaveFormats.names()), "auto: a LoRA run saves an adapter, a full fine-tune a checkpoint."},
        {"save_dtype", &S::save_dtype, one_of(grpo::kSaveDtypes.names()), "Stored dtype of a saved checkpoint."},
        {"seed", &S::seed, at_least(0), "Seed of data order and LoRA initialisation."}}},
      {"what is trained",
       {{"use_lora", &S::use_lora, {}, "Train a LoRA adapter (false: full fine-tuning of every base weight)."},
        {"r", &S::r, shared_range::lora_r(), "LoRA rank."},
        {"lora_alpha", &S::lora_alpha, shared_range::lora_alpha(), "LoRA scaling numerator (scale = lora_alpha / r, or / sqrt(r) with use_rslora)."},
        {"lora_dropout", &S::lora_dropout, shared_range::lora_dropout(), "Dropout on the LoRA input."},
        {"target_modules", &S::target_modules, {}, "Projections that get adapters: \"all-linear\" or a list such as [\"q_proj\", \"v_proj\"].",
         false, "\"all-linear\" or list of strings"},
        {"use_rslora", &S::use_rslora, {}, "Rank-stabilised LoRA scaling (lora_alpha / sqrt(r))."}}},
      {"optimisation",
       {{"learning_rate", &S::learning_rate, shared_range::learning_rate(), "Initial learning rate of AdamW."},
        {"lr_scheduler_type", &S::lr_scheduler_type, shared_range::lr_scheduler_type(), "Learning-rate schedule after warmup."},
        {"warmup_ratio", &S::warmup_ratio, shared_range::warmup_ratio(), "Fraction of the steps spent warming the learning rate up from 0."},
        {"max_steps", &S::max_steps, at_least(-1), "Optimizer steps (<= 0: num_train_epochs passes over the data)."},
        {"num_train_epochs", &S::num_train_epochs, shared_range::num_train_epochs(), "Passes over the data when max_steps <= 0."},
        {"per_device_train_batch_size", &S::per_device_train_batch_size, closed(1, 1 << 20), "Examples per optimizer step."},
        {"token_budget", &S::token_budget, closed(2, shared_range::kMaxTokenBudget), "Tokens per packed row (one forward/backward)."},
        {"max_length", &S::max_length, at_least(2), "Most prompt + completion tokens; longer examples are left-truncated."},
        {"max_grad_norm", &S::max_grad_norm, closed(-1, 1e9), "Gradient clipping norm (<= 0: no clipping)."},
        {"weight_decay", &S::weight_decay, shared_range::weight_decay(), "AdamW's decoupled weight decay."},
        {"adam_beta1", &S::adam_beta1, right_open(0, 1), "AdamW's first-moment decay."},
        {"adam_beta2", &S::adam_beta2, right_open(0, 1), "AdamW's second-moment decay."},
        {"adam_epsilon", &S::adam_epsilon, left_open(0, 1), "AdamW's denominator epsilon."}}},
      {"reporting",
       {{"logging_steps", &S::logging_steps, at_least(1), "Print a progress line every this many steps."},
        {"eval_steps", &S::eval_steps, at_least(0), "Built-in arithmetic: greedy accuracy every this many steps (0: at the end only)."}}},
  });
  return t;
}

}  // namespace

const std::vector<grpo::ConfigKeyInfo>& sft_config_schema() { return table().schema(); }

std::vector<std::string> sft_config_keys() { return grpo::config_key_names(sft_config_schema()); }

void SftConfig::apply(const json& j, const std::string& source) { table().apply(*this, j, source, "grpo sft --help-config"); }

void SftConfig::validate(const std::string& source) const {
  check(!model_name_or_path.empty(), source, "model_name_or_path is required", "a Hugging Face model directory");
  check(task.empty() != train_file.empty(), source + ": train_file / task",
        task.empty() ? "give a train_file (JSONL prompt/completion pairs) or task: arith"
                     : "give either train_file or task: arith, not both");
  check(!output_dir.empty(), source, "output_dir is required");
  bool modules_ok = target_modules.is_string() || (target_modules.is_array() && !target_modules.empty());
  if (target_modules.is_array())
    for (const auto& x : target_modules) modules_ok = modules_ok && x.is_string();
  check(modules_ok, source,
        "key \"target_modules\": value " + target_modules.dump() +
            " is not valid: expected \"all-linear\" or a list of module names such as [\"q_proj\", \"v_proj\"]");
  check(use_lora || save_format != "adapter", source + ": save_format",
        "\"adapter\" needs use_lora: true (a full fine-tune saves a checkpoint)");
}

json SftConfig::to_json() const { return table().to_json(*this); }

std::string SftConfig::resolved_save_format() const {
  if (save_format != "auto") return save_format;
  return use_lora ? "adapter" : "checkpoint";
}

SftConfig load_sft_config(const std::string& path) {
  SftConfig c;
  c.apply(grpo::load_config_file(path), path);
  c.validate(path);
  return c;
}

}  // namespace grpo::run
