#include "core/common/json_limits.h"
#include "core/grpo/config.h"

#include <cmath>
#include <limits>

#include <yaml-cpp/yaml.h>

#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/log.h"
#include "core/common/strings.h"
#include "core/grpo/choices.h"
#include "core/grpo/config_table.h"
#include "core/grpo/shared_ranges.h"
#include "core/model/lora_config.h"
#include "core/grpo/trl_keys.h"

namespace grpo::grpo {
namespace {

using json = nlohmann::json;
constexpr unsigned kLive = kRetunable;  // a live run may change it (retune)
constexpr unsigned kForm = kOnForm;     // the app's setup form shows it

// The key table: one row per key, under its group, with what it may hold and what it does.
// Defaults are TrainConfig's own initialisers (config.h); TRL/PEFT spellings of a key are its
// aliases (trl_keys.cpp reads them from here).
const ConfigTable<TrainConfig>& table() {
  using T = TrainConfig;
  static const ConfigTable<TrainConfig> t({
      {"model and data",
       {{"model_name_or_path", &T::model_name_or_path, {}, "A Hugging Face model folder, or a Hub repo id (org/name) in the Hugging Face cache."},
        {"model_revision", &T::model_revision, {}, "For a Hub repo id: the branch, tag or commit of the model."},
        {"train_file", &T::train_file, {}, "Prompts as JSONL, CSV or Parquet (prompt or messages, answer, columns for the rewards)."},
        {"eval_file", &T::eval_file, {}, "Held-out prompts for the greedy evaluation (same formats as train_file)."},
        {"dataset_name", &T::dataset_name, {}, "A Hub dataset repo id in the cache, a folder laid out like one, or a file (TRL's dataset_name)."},
        {"dataset_config", &T::dataset_config, {}, "The dataset's config (\"\" = its default config)."},
        {"dataset_revision", &T::dataset_revision, {}, "The dataset's branch, tag, commit, or refs/convert/parquet."},
        {"dataset_train_split", &T::dataset_train_split, {}, "The split to train on."},
        {"dataset_test_split", &T::dataset_test_split, {}, "The split to evaluate on (\"\" = hold out eval_fraction / eval_size of the training data)."},
        {"dataset_columns", &T::dataset_columns, {}, "Column renames, e.g. {\"question\": \"prompt\"}.", false, "object of renames"},
        {"task", &T::task, one_of({"", "arith"}), "A built-in task instead of a dataset: \"arith\" generates arithmetic problems."},
        {"task_difficulty", &T::task_difficulty, closed(1, 5), "Built-in arithmetic: 1 = one digit +-, 2 = two digits +-, ... 5 = up to four digits, three terms.", kForm},
        {"eval_fraction", &T::eval_fraction, right_open(0, 1), "Fraction of the training data held out for evaluation when there is no eval set."},
        {"eval_size", &T::eval_size, shared_range::eval_size(), "Or a fixed number of held-out examples.", kForm},
        {"output_dir", &T::output_dir, {}, "The run directory (default: runs/run-<date>-<time>)."},
        {"seed", &T::seed, at_least(0), "Seed of sampling and LoRA initialisation, and of the data when data_seed is -1.", kForm},
        {"data_seed", &T::data_seed, at_least(-1), "Seed of the data: the built-in task's problems, the eval split and the order (TRL's data_seed; -1 = seed). Runs that differ in seed only then share one eval set."}}},
      {"generation",
       {{"num_generations", &T::num_generations, closed(2, 4096), "Completions sampled per prompt (the GRPO group size G).", kForm},
        {"max_prompt_length", &T::max_prompt_length, at_least(1), "Prompts longer than this many tokens are truncated from the left.", kForm},
        {"max_completion_length", &T::max_completion_length, closed(1, 1 << 20), "Most tokens generated per completion.", kLive | kForm},
        {"temperature", &T::temperature, left_open(0, 100), "Sampling temperature; higher explores more.", kLive | kForm},
        {"top_p", &T::top_p, left_open(0, 1), "Nucleus sampling: keep the smallest token set with this much probability.", kLive | kForm},
        {"top_k", &T::top_k, closed(0, 1 << 24), "Keep only the k most likely tokens (0: no top-k filter).", kLive},
        {"min_p", &T::min_p, right_open(0, 1), "Drop tokens less likely than min_p times the most likely one (0: off).", kLive},
        {"stop", &T::stop, {}, "Stop strings: generation ends after any of them."},
        {"chat_template_kwargs", &T::chat_template_kwargs, {}, "Extra variables for the model's chat template, e.g. {\"enable_thinking\": false} for Qwen 3.", kForm, "object"}}},
      {"optimisation",
       {{"learning_rate", &T::learning_rate, shared_range::learning_rate(), "Initial learning rate of AdamW (LoRA weights only).", kLive | kForm},
        {"lr_scheduler_type", &T::lr_scheduler_type, shared_range::lr_scheduler_type(), "Learning-rate schedule after warmup.", kForm},
        {"warmup_ratio", &T::warmup_ratio, shared_range::warmup_ratio(), "Fraction of max_steps spent warming the learning rate up from 0.", kForm},
        {"max_steps", &T::max_steps, at_least(1), "Optimizer steps of the run.", kForm},
        {"num_train_epochs", &T::num_train_epochs, shared_range::num_train_epochs(), "Passes over a finite dataset before the stream restarts."},
        {"per_device_train_batch_size", &T::per_device_train_batch_size, closed(1, 1 << 20), "Completions per micro-batch when token_budget is 0."},
        {"gradient_accumulation_steps", &T::gradient_accumulation_steps, closed(1, 1 << 20), "TRL's: with per_device_train_batch_size, the completions per optimizer step; sets prompts_per_step when that is not given (micro-batches come from packing)."},
        {"prompts_per_step", &T::prompts_per_step, closed(1, 1 << 20), "Prompt groups (of num_generations completions) per optimizer step.", kForm},
        {"max_grad_norm", &T::max_grad_norm, above(0), "Gradient clipping norm.", kForm},
        {"weight_decay", &T::weight_decay, shared_range::weight_decay(), "AdamW's decoupled weight decay."},
        {"adam_beta1", &T::adam_beta1, right_open(0, 1), "AdamW's first-moment decay."},
        {"adam_beta2", &T::adam_beta2, right_open(0, 1), "AdamW's second-moment decay."},
        {"adam_epsilon", &T::adam_epsilon, left_open(0, 1), "AdamW's denominator epsilon."},
        {"num_iterations", &T::num_iterations, closed(1, 64), "Optimizer steps on each batch of samples (TRL's mu): a batch is trained this many consecutive steps, so max_steps / num_iterations batches are generated. The clip holds each later step near the policy that sampled it (or the proximal policy, with vllm_importance_sampling_correction)."}}},
      {"GRPO loss",
       {{"loss_type", &T::loss_type, one_of(kLossTypes.names()), "Policy loss (TRL's): grpo (per sequence), bnpo (per batch), dr_grpo (constant), dapo (per token, global batch) clip the ratio; cispo clips the ratio as a stopped weight on log-probs; sapo gates it softly; luspo weighs each sequence by its length (with importance_sampling_level sequence); vespo weighs log-probs by a gamma function of the sequence ratio.", kForm},
        {"scale_rewards", &T::scale_rewards, one_of(kScaleRewards.names()), "Advantage scaling: divide by the group's reward std, the batch's, or not at all.", kForm},
        {"multi_objective_aggregation", &T::multi_objective_aggregation, one_of(kMultiObjective.names()), "Several reward functions: sum them (weighted) then normalise in the group, or normalise each in its group, sum, then normalise over the batch (GDPO; scale_rewards does not apply).", kLive},
        {"epsilon", &T::epsilon, left_open(0, 1), "Lower clipping range of the importance ratio (1 - epsilon).", kLive | kForm},
        {"epsilon_high", &T::epsilon_high, left_open(0, 10), "Upper clipping range (1 + epsilon_high; null = epsilon); DAPO's clip-higher uses 0.28. With cispo, the cap of the ratio itself (TRL suggests 5).", kLive | kForm},
        {"beta", &T::beta, closed(0, 100), "KL coefficient against the base model; 0 skips the reference model.", kLive | kForm},
        {"importance_sampling_level", &T::importance_sampling_level, one_of(kImportanceSamplingLevels.names()), "The ratio per token, per sequence (GSPO: the mean log-ratio of its tokens, clipped as one), or sequence_token (GSPO-token: the sequence's ratio, each token's own gradient; grpo, bnpo, dr_grpo and dapo only)."},
        {"delta", &T::delta, above(0), "Two-sided clipping (INTELLECT-2): the unclipped ratio is also capped at delta (null = off); grpo, bnpo, dr_grpo, dapo and luspo; best above 1 + epsilon_high.", kLive},
        {"sapo_temperature_pos", &T::sapo_temperature_pos, left_open(0, 1000), "sapo: temperature of the soft gate on tokens with a positive advantage.", kLive},
        {"sapo_temperature_neg", &T::sapo_temperature_neg, left_open(0, 1000), "sapo: temperature of the soft gate on tokens with a zero or negative advantage.", kLive},
        {"vespo_k_pos", &T::vespo_k_pos, closed(0, 1000), "vespo: exponent k of the gamma weight e^lambda w^k e^(-lambda w) for advantages >= 0.", kLive},
        {"vespo_lambda_pos", &T::vespo_lambda_pos, closed(0, 1000), "vespo: decay lambda of the gamma weight for advantages >= 0 (below 1e-4 counts as 1e-4).", kLive},
        {"vespo_k_neg", &T::vespo_k_neg, closed(0, 1000), "vespo: exponent k of the gamma weight for negative advantages.", kLive},
        {"vespo_lambda_neg", &T::vespo_lambda_neg, closed(0, 1000), "vespo: decay lambda of the gamma weight for negative advantages (below 1e-4 counts as 1e-4).", kLive},
        {"mask_truncated_completions", &T::mask_truncated_completions, {}, "Leave completions cut off at max_completion_length out of the loss."},
        {"use_bias_correction_kl", &T::use_bias_correction_kl, {}, "With beta > 0: multiply the KL to the reference by the importance weight (TRL's bias correction)."},
        {"top_entropy_quantile", &T::top_entropy_quantile, closed(0, 1), "Train only the tokens whose entropy is at or above this quantile of the micro-batch's (0.2: the top 20%; 1: every token).", kLive},
        {"entropy_coef", &T::entropy_coef, closed(0, 100), "Entropy bonus: subtract this times the mean token entropy from the loss (0: none).", kLive},
        {"use_adaptive_entropy", &T::use_adaptive_entropy, {}, "Adapt the entropy bonus: after each step, entropy_coef_delta more when the step's entropy is at or below entropy_target, less above it; no bonus while it is above."},
        {"entropy_coef_min", &T::entropy_coef_min, closed(0, 100), "Adaptive entropy: the coefficient's floor.", kLive},
        {"entropy_coef_max", &T::entropy_coef_max, closed(0, 100), "Adaptive entropy: the coefficient's ceiling.", kLive},
        {"entropy_coef_delta", &T::entropy_coef_delta, closed(0, 100), "Adaptive entropy: the change per step.", kLive},
        {"entropy_target", &T::entropy_target, closed(0, 1000), "Adaptive entropy: the mean token entropy (nats) below which the bonus grows.", kLive},
        {"vllm_importance_sampling_correction", &T::vllm_importance_sampling_correction, {}, "Take the clip around the trainer's own policy at the start of the step (the proximal policy) and weigh the loss by the importance ratio to the sampler, per token or per completion as vllm_importance_sampling_mode says; off: the ratio is taken against the sampler's log-probs directly.", kForm},
        {"vllm_importance_sampling_mode", &T::vllm_importance_sampling_mode, one_of(kIsCorrectionModes.names()), "The proximal-to-sampler ratio per token or per sequence (the product over its tokens), truncated into [clip_min, clip_max] or zeroed outside it.", kLive},
        {"vllm_importance_sampling_clip_max", &T::vllm_importance_sampling_clip_max, above(0), "Upper bound of that ratio (null = none).", kLive, nullptr, {"vllm_importance_sampling_cap"}},
        {"vllm_importance_sampling_clip_min", &T::vllm_importance_sampling_clip_min, at_least(0), "Lower bound of that ratio (null = none).", kLive},
        {"off_policy_mask_threshold", &T::off_policy_mask_threshold, at_least(0), "Leave out completions with a negative advantage whose mean log-prob gap, sampler minus trainer, exceeds this (DeepSeek-V3.2's off-policy sequence masking; null = off).", kLive},
        {"token_budget", &T::token_budget, closed(0, shared_range::kMaxTokenBudget), "Tokens per packed training row (padding-free); 0 pads micro-batches instead.", kForm},
        {"share_prompts", &T::share_prompts, {}, "Forward each prompt once for all its completions in a training row, which attend to it as to their own prompt: the same log-probs and gradients from fewer tokens (docs/formulas.md, \"Shared prompts\"); false forwards a copy of the prompt with every completion, as TRL does."},
        {"gradient_checkpointing", &T::gradient_checkpointing, {}, "Recompute activations in backward: less memory, more time.", kForm}}},
      {"LoRA",
       {{"r", &T::r, shared_range::lora_r(), "LoRA rank.", kForm, nullptr, {"lora_r"}},
        {"lora_alpha", &T::lora_alpha, shared_range::lora_alpha(), "LoRA scaling numerator (scale = lora_alpha / r, or / sqrt(r) with use_rslora).", kForm},
        {"lora_dropout", &T::lora_dropout, shared_range::lora_dropout(), "Dropout on the LoRA input.", kForm},
        {"target_modules", &T::target_modules, {}, "Projections that get adapters: \"all-linear\" or a list such as [\"q_proj\", \"v_proj\"].", kForm, "\"all-linear\" or list of strings", {"lora_target_modules"}},
        {"use_rslora", &T::use_rslora, {}, "Rank-stabilised LoRA scaling (lora_alpha / sqrt(r)).", kForm},
        {"init_adapter", &T::init_adapter, {}, "A PEFT adapter folder to start from (\"\" = a fresh LoRA)."}}},
      {"async engine",
       {{"max_staleness", &T::max_staleness, closed(0, 1000), "Drop rollouts sampled more than this many policy versions ago.", kLive | kForm},
        {"weight_sync_steps", &T::weight_sync_steps, closed(1, 1000000), "Publish a new adapter version to the generators every this many steps.", kLive | kForm},
        {"max_inflight_tasks", &T::max_inflight_tasks, closed(-1, 1000000), "Most completions being generated at once (-1: max(max_staleness, 1) x a step's completions).", kLive | kForm},
        {"queue_maxsize", &T::queue_maxsize, at_least(1), "Rollout queue bound in completions (back-pressure on generation).", kForm},
        {"local_generators", &T::local_generators, closed(0, 64), "In-process generator threads (0: remote workers only).", kForm}}},
      {"workers",
       {{"worker_urls", &T::worker_urls, {}, "http(s)://host:port of `grpo worker` processes or vLLM servers that generate rollouts."},
        {"cluster_token_file", &T::cluster_token_file, {}, "The bearer token shared with the workers (\"\" = ~/.config/grpo-studio/cluster-token, made on first use)."},
        {"cluster_tls_fingerprint", &T::cluster_tls_fingerprint, {}, "SHA-256 fingerprints (comma-separated) of https:// workers' certificates (\"\" = system CAs)."},
        {"discovery", &T::discovery, {}, "Also use workers that announce themselves with signed UDP beacons."},
        {"discovery_address", &T::discovery_address, {}, "UDP multicast group:port of the worker beacons."},
        {"worker_routing", &T::worker_routing, one_of({"group", "prefix"}), "How completion requests pick a worker: prefix (the reference LoRA proxy's KV-prefix affinity, else the least loaded), or group (the default: also a group's requests on one worker, and the shortest expected delay from each worker's measured speed instead of the least loaded; docs/workers.md, \"Routing\")."},
        {"worker_timeout_s", &T::worker_timeout_s, above(0), "A completion request slower than this takes its worker out.", false, nullptr, {"request_timeout"}},
        {"serve", &T::serve, {}, "HOST:PORT: serve the run over HTTP (state, metrics, control, the browser view, and workers joining; port 0: any free). \"\" = not served."}}},
      {"slurm workers",
       {{"slurm_workers", &T::slurm_workers, closed(0, 1000), "Rollout workers to ask Slurm for at start, as one job array (0: none). They join the run at serve."},
        {"slurm_partition", &T::slurm_partition, {}, "The partition (\"\" = the cluster's default)."},
        {"slurm_gres", &T::slurm_gres, {}, "Generic resources per worker, e.g. gpu:1."},
        {"slurm_cpus_per_task", &T::slurm_cpus_per_task, closed(0, 1024), "CPUs per worker (0: the partition's default)."},
        {"slurm_mem", &T::slurm_mem, {}, "Memory per worker, e.g. 16G."},
        {"slurm_time_limit", &T::slurm_time_limit, {}, "Each worker's time limit: minutes, or [D-]HH:MM[:SS] (\"\" = the partition's)."},
        {"slurm_account", &T::slurm_account, {}, "The account to charge."},
        {"slurm_qos", &T::slurm_qos, {}, "The quality of service."},
        {"slurm_sbatch_options", &T::slurm_sbatch_options, {}, "More sbatch options, each --name or --name=value, e.g. [--constraint=a100]."},
        {"slurm_worker_args", &T::slurm_worker_args, {}, "More `grpo worker` flags for every worker, e.g. [--threads, \"8\"]."},
        {"slurm_worker_listen", &T::slurm_worker_listen, {}, "HOST:PORT each worker listens on, on its node (port 0: any free)."},
        {"slurm_worker_program", &T::slurm_worker_program, {}, "The grpo program on the nodes (\"\" = this program's own path; it must be there too)."},
        {"slurm_trainer_url", &T::slurm_trainer_url, {}, "The URL the workers join at (\"\" = the serve endpoint's, with this host's name for 0.0.0.0)."},
        {"slurm_bin_dir", &T::slurm_bin_dir, {}, "The folder of sbatch, squeue and scancel (\"\" = PATH)."},
        {"slurm_max_resubmits", &T::slurm_max_resubmits, closed(0, 10000), "Workers whose job ended (failed, preempted, timed out, cancelled) are replaced up to this many times over the run."},
        {"slurm_poll_s", &T::slurm_poll_s, closed(0.2, 3600), "Seconds between looks at the jobs (squeue)."},
        {"slurm_drain_s", &T::slurm_drain_s, closed(0, 86400), "Slurm signals a worker this many seconds before its time limit, and it leaves the run cleanly (0: never)."}}},
      {"rewards",
       {{"reward_funcs", &T::reward_funcs, {}, "Reward functions, e.g. [{\"name\": \"accuracy\"}]: built-in, TRL names, or external programs.", false, "list of reward specs"},
        {"reward_weights", &T::reward_weights, {}, "One weight per reward function (empty = all 1).", kLive}}},
      {"logging and saving",
       {{"logging_steps", &T::logging_steps, at_least(1), "Print a progress line every this many steps."},
        {"save_steps", &T::save_steps, at_least(0), "Checkpoint every this many steps (0: only at the end).", kForm},
        {"eval_steps", &T::eval_steps, at_least(0), "Greedy eval accuracy every this many steps (0: never).", kForm},
        {"mfu_peak_tflops", &T::mfu_peak_tflops, closed(0, 1e6), "The training device's peak dense TFLOP/s that MFU (perf/mfu_*) divides by, e.g. 989 for an H100 SXM in bf16; 0 = a GEMM in the training dtype measured at start."}}},
      {"the Hub",
       {{"push_to_hub", &T::push_to_hub, {}, "Push the adapter (with its model card) to the Hub while training, as hub_strategy says, and at the end (token: HF_TOKEN or the huggingface_hub token file).", kForm},
        {"hub_model_id", &T::hub_model_id, {}, "The model repo to push to, namespace/name (created when missing).", kForm},
        {"hub_strategy", &T::hub_strategy, one_of(kHubStrategies.names()), "end: only at the end; every_save: at each checkpoint too; checkpoint: and the newest checkpoint as last-checkpoint/; all_checkpoints: and each checkpoint in its own folder."},
        {"hub_private_repo", &T::hub_private_repo, {}, "Create the repo private (a repo that exists keeps its visibility)."},
        {"hub_revision", &T::hub_revision, {}, "The branch to push to (\"\" = main; created from main when missing)."},
        {"hub_always_push", &T::hub_always_push, {}, "A checkpoint saved while a push still runs is pushed after it, instead of skipped."}}},
  });
  return t;
}

// JSON strings must be UTF-8 (nlohmann's parser checks; yaml-cpp does not): reject bad text at
// load time with its position, not later when the config is written back out.
void require_utf8(const std::string& text, const YAML::Node& n, const std::string& source) {
  if (is_valid_utf8(text)) return;
  const auto m = n.Mark();
  throw Error(source, "line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1) +
                          ": text is not valid UTF-8", "save the file as UTF-8");
}

json yaml_to_json(const YAML::Node& n, const std::string& source) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(yaml_to_json(e, source));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) {
        const auto key = kv.first.as<std::string>();
        require_utf8(key, kv.first, source);
        o[key] = yaml_to_json(kv.second, source);
      }
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      require_utf8(s, n, source);
      if (n.Tag() == "!") return s;  // quoted: always a string
      if (s == "null" || s == "~" || s.empty()) return nullptr;
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      // Numbers as YAML 1.2's core schema reads them (also 1e-5 without a dot).
      json num = json::parse(s, nullptr, false);
      if (!num.is_discarded() && num.is_number()) return num;
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (end && *end == '\0' && !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' || s[0] == '.'))
        return d;
      return s;
    }
    default: throw Error(source, "unsupported YAML node");
  }
}

}  // namespace

int64_t TrainConfig::resolved_max_inflight_tasks() const {
  if (max_inflight_tasks > 0) return max_inflight_tasks;
  int64_t per_step = std::max<int64_t>(1, prompts_per_step * num_generations);
  return std::max<int64_t>(max_staleness, 1) * per_step;
}

// TRL sizes an optimizer step in completions: per_device_train_batch_size x gradient_accumulation_steps
// on one process (GRPOConfig's generation batch when steps_per_generation is left unset). Here a
// step is prompts_per_step groups of num_generations, and the micro-batches inside it come from
// packing. So a config that gives gradient_accumulation_steps but not prompts_per_step (a TRL
// config) gets the step size TRL would train on; one that gives both keeps prompts_per_step and
// says when the two disagree, unless gradient_accumulation_steps is the default 1 (docs/formulas.md,
// "Differences from TRL").
static void derive_prompts_per_step(TrainConfig& c, const json& given, const std::string& source) {
  if (!given.contains("gradient_accumulation_steps")) return;
  int64_t completions = 0;
  check(!__builtin_mul_overflow(c.per_device_train_batch_size, c.gradient_accumulation_steps, &completions), source,
        "per_device_train_batch_size x gradient_accumulation_steps overflows");
  if (given.contains("prompts_per_step")) {  // (every run folder's config.json has both, mostly GA 1)
    int64_t per_step = 0;
    if (c.gradient_accumulation_steps != 1 && !__builtin_mul_overflow(c.prompts_per_step, c.num_generations, &per_step) &&
        completions != per_step)
      log_warn(source + ": prompts_per_step (" + std::to_string(c.prompts_per_step) + ") x num_generations (" +
               std::to_string(c.num_generations) + ") sets the step's " + std::to_string(per_step) +
               " completions; TRL's per_device_train_batch_size x gradient_accumulation_steps (" +
               std::to_string(completions) + ") is not used for that");
    return;
  }
  check(completions % c.num_generations == 0, source,
        "key \"gradient_accumulation_steps\": per_device_train_batch_size (" + std::to_string(c.per_device_train_batch_size) +
            ") x gradient_accumulation_steps (" + std::to_string(c.gradient_accumulation_steps) + ") = " +
            std::to_string(completions) + " completions per optimizer step, not a whole number of groups of num_generations (" +
            std::to_string(c.num_generations) + ")",
        "make it a multiple of num_generations (as TRL requires of its generation batch), or set prompts_per_step");
  c.prompts_per_step = completions / c.num_generations;
  log_info(source + ": prompts_per_step = " + std::to_string(c.prompts_per_step) + " (per_device_train_batch_size " +
           std::to_string(c.per_device_train_batch_size) + " x gradient_accumulation_steps " +
           std::to_string(c.gradient_accumulation_steps) + " / num_generations " + std::to_string(c.num_generations) +
           ": TRL's completions per optimizer step)");
}

void TrainConfig::apply(const json& j, const std::string& source) {
  check(j.is_object(), source, std::string("expected a JSON/YAML object of settings, got ") + j.type_name());
  // TRL/PEFT configs load as they are: their keys are renamed, or listed as ignored with why.
  const TrlImport trl = translate_trl_config(j, source, [](const std::string& k) { return table().index(k) >= 0; });
  for (const auto& n : trl.ignored) log_warn(source + ": ignoring \"" + n.key + "\" (" + n.value.dump() + "): " + n.note);
  for (const auto& n : trl.translated) log_info(source + ": \"" + n.key + "\" " + n.note);
  TrainConfig next = *this;
  json keys = trl.config;
  // Slurm reads a bare number as minutes, and so does a YAML `slurm_time_limit: 60`.
  if (auto t = keys.find("slurm_time_limit"); t != keys.end() && t->is_number_integer() && t->get<int64_t>() >= 0)
    *t = std::to_string(t->get<int64_t>());
  table().apply(next, keys, source, "grpo train --help-config");
  derive_prompts_per_step(next, keys, source);
  *this = std::move(next);  // all or nothing
}

void TrainConfig::validate(const std::string& source) const {
  if (const char* why = refused_loss_level(kLossTypes.parse(loss_type, source),
                                           kImportanceSamplingLevels.parse(importance_sampling_level, source)))
    throw Error(source, std::string("loss_type \"") + loss_type + "\" with " + why,
                "use importance_sampling_level \"sequence\" (GSPO), or one of those loss types");
  check(!model_name_or_path.empty(), source, "key \"model_name_or_path\" is missing",
        "set it to a Hugging Face model directory or a Hub repo id (grpo download REPO_ID)");
  check(!model_revision.empty(), source, "key \"model_revision\" is empty", "use \"main\", a tag or a commit hash");
  check(!train_file.empty() || !dataset_name.empty() || task == "arith", source,
        "no training data: set \"dataset_name\", \"train_file\" or \"task\": \"arith\"");
  check(train_file.empty() || dataset_name.empty(), source, "set either \"train_file\" or \"dataset_name\", not both");
  check(eval_file.empty() || dataset_test_split.empty(), source,
        "set either \"eval_file\" or \"dataset_test_split\", not both");
  check(dataset_name.empty() || !dataset_train_split.empty(), source, "key \"dataset_train_split\" is empty",
        "the split to train on, e.g. \"train\"");
  check(dataset_columns.is_object(), source,
        "key \"dataset_columns\": value " + dataset_columns.dump() + " is not valid: expected an object of renames",
        "e.g. {\"question\": \"prompt\"}");
  for (const auto& [from, to] : dataset_columns.items())
    check(!from.empty() && to.is_string() && !to.get<std::string>().empty(), source,
          "key \"dataset_columns\": \"" + from + "\" must map to a non-empty column name, got " + to.dump());
  check(eval_fraction == 0.0 || eval_size == 0, source, "set either \"eval_fraction\" or \"eval_size\", not both");
  check(!vllm_importance_sampling_clip_min || !vllm_importance_sampling_clip_max ||
            *vllm_importance_sampling_clip_min <= *vllm_importance_sampling_clip_max,
        source, "vllm_importance_sampling_clip_min (" + std::to_string(vllm_importance_sampling_clip_min.value_or(0)) +
                    ") is above vllm_importance_sampling_clip_max (" +
                    std::to_string(vllm_importance_sampling_clip_max.value_or(0)) + ")");
  check(entropy_coef_min <= entropy_coef_max, source,
        "entropy_coef_min (" + std::to_string(entropy_coef_min) + ") is above entropy_coef_max (" +
            std::to_string(entropy_coef_max) + ")");
  if (push_to_hub) {
    check(!hub_model_id.empty(), source, "key \"hub_model_id\" is empty while push_to_hub is true",
          "give the repo to push to as namespace/name, e.g. your-name/grpo-arith-lora");
    const auto slash = hub_model_id.find('/');
    check(slash != std::string::npos && slash > 0 && slash + 1 < hub_model_id.size() && hub_model_id.find('/', slash + 1) == std::string::npos,
          source, "key \"hub_model_id\": value \"" + hub_model_id + "\" is not valid: expected namespace/name",
          "e.g. your-name/grpo-arith-lora");
  }
  // The limits a worker puts on a request's stop strings (cluster::ModelLimits): past them every
  // request to a worker would be refused, so the run is refused up front.
  check(stop.size() <= 32, source, "key \"stop\": " + std::to_string(stop.size()) + " stop strings; at most 32");
  for (const auto& s : stop)
    check(s.size() <= 1024, source, "key \"stop\": a stop string of " + std::to_string(s.size()) + " bytes; each may have at most 1024");
  check(target_modules.is_string() || target_modules.is_array(), source,
        "key \"target_modules\": expected \"all-linear\" or a list of module names");
  const auto& modules = model::projection_names();  // Phi-3's fused qkv_proj / gate_up_proj too
  if (target_modules.is_string()) {
    check(target_modules == "all-linear", source,
          "key \"target_modules\": value " + target_modules.dump() + " is not valid: expected \"all-linear\" or a list of " + join(modules, ", "));
  } else {
    for (const auto& m : target_modules) {
      bool ok = m.is_string() && std::find(modules.begin(), modules.end(), m.get<std::string>()) != modules.end();
      std::string near = m.is_string() ? nearest_name(m.get<std::string>(), modules) : "";
      check(ok, source, "key \"target_modules\": " + m.dump() + " is not one of " + join(modules, ", "),
            near.empty() ? "" : "did you mean \"" + near + "\"?");
    }
  }
  check(chat_template_kwargs.is_object(), source,
        "key \"chat_template_kwargs\": value " + chat_template_kwargs.dump() + " is not valid: expected an object of "
        "template variables", "e.g. {\"enable_thinking\": false}");
  for (const char* reserved : {"messages", "add_generation_prompt"})
    check(!chat_template_kwargs.contains(reserved), source,
          std::string("key \"chat_template_kwargs\": \"") + reserved + "\" is set from each prompt, not in the config");
  check(chat_template_kwargs.dump().size() <= 65536, source,
        "key \"chat_template_kwargs\": larger than 64 KiB of JSON", "template variables are small flags and strings");
  check(reward_funcs.is_array() && !reward_funcs.empty(), source,
        "key \"reward_funcs\": expected a non-empty list of reward specs like {\"name\": \"accuracy\"}");
  check(reward_weights.empty() || reward_weights.size() == reward_funcs.size(), source,
        "key \"reward_weights\": " + std::to_string(reward_weights.size()) + " weights for " +
            std::to_string(reward_funcs.size()) + " reward functions");
}

json TrainConfig::to_json() const { return table().to_json(*this); }

json parse_config_text(const std::string& text, const std::string& source) {
  if (ends_with(source, ".yaml") || ends_with(source, ".yml")) {
    check_yaml_flow_depth(text, source);
    try {
      return yaml_to_json(YAML::Load(text), source);
    } catch (const YAML::Exception& e) {
      throw Error(source, "line " + std::to_string(e.mark.line + 1) + ", column " + std::to_string(e.mark.column + 1) +
                              ": invalid YAML: " + e.msg);
    }
  }
  check_json_depth(text, source);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large
    throw Error(source, std::string("invalid JSON: ") + e.what());
  }
}

json load_config_file(const std::string& path) { return parse_config_text(read_file(path), path); }

TrainConfig load_train_config(const std::string& path) {
  TrainConfig c;
  c.apply(load_config_file(path), path);
  c.validate(path);
  return c;
}

json parse_set_options(const std::vector<std::string>& assignments) {
  json out = json::object();
  for (const auto& kv : assignments) {
    const size_t eq = kv.find('=');
    check(eq != std::string::npos && eq > 0, "--set " + kv, "expected KEY=VALUE", "e.g. --set learning_rate=1e-5");
    const std::string key = trim(kv.substr(0, eq)), text = kv.substr(eq + 1);
    json value;
    check_yaml_flow_depth(text, "--set " + key);
    try {  // a YAML scalar or flow value (JSON included); text YAML cannot read stays text
      value = yaml_to_json(YAML::Load(text), "--set " + key);
    } catch (const YAML::Exception&) {
      value = text;
    }
    out[key] = value;
  }
  return out;
}

const std::vector<ConfigKeyInfo>& train_config_schema() { return table().schema(); }

std::vector<std::string> config_keys() { return config_key_names(train_config_schema()); }

bool is_retunable(const std::string& key) {
  const ConfigKeyInfo* k = find_config_key(train_config_schema(), key);
  return k && k->retunable;
}

std::string config_key_range(const std::string& key) {
  const ConfigKeyInfo* k = find_config_key(train_config_schema(), key);
  return k ? k->range_text() : "";
}

}  // namespace grpo::grpo
