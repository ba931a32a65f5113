// The run configuration, with TRL's hyperparameter names (docs/ARCHITECTURE.md, "The config").
// Loaded from JSON or YAML; an unknown key or a bad value is an error naming the file, the key, the
// value, what is allowed, and the nearest known key. Every field is described once, in the key
// table of config.cpp (type, range, default, retunable, group, doc): train_config_schema() hands it
// out as plain data (config_schema.h), and validation, live retunes, `--set`, `--help-config`, the
// app's forms and the resolved config.json of a run all read it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/grpo/config_schema.h"

namespace grpo::grpo {

struct TrainConfig {
  // model and data
  std::string model_name_or_path;   // a Hugging Face model directory, or a Hub repo id in the HF cache
  std::string model_revision = "main";  // repo id: branch, tag or commit (core/hub/hf_cache.h)
  std::string train_file;           // JSONL, CSV or Parquet; empty with task = "arith" (built-in generator)
  std::string eval_file;
  // TRL's dataset_name: a Hub dataset repo id in the HF cache, a folder laid out like one, or a
  // file; its config and splits as `datasets` picks them (core/rollout/dataset_source.h).
  std::string dataset_name;
  std::string dataset_config;           // "" = the dataset's default config
  std::string dataset_revision = "main";  // branch, tag, commit, or refs/convert/parquet
  std::string dataset_train_split = "train";
  std::string dataset_test_split;       // "" = no test split: eval_fraction / eval_size hold one out
  nlohmann::json dataset_columns = nlohmann::json::object();  // {"question": "prompt"}: renames
  std::string task;                 // "" or "arith" (the demo's generated arithmetic)
  int64_t task_difficulty = 2;      // arith: 1 = one digit +-, 2 = two digits +-, ... 5
  double eval_fraction = 0.0;       // held-out split of train_file when eval_file is empty
  int64_t eval_size = 0;            // or a fixed number of held-out examples
  std::string output_dir;
  int64_t seed = 42;
  int64_t data_seed = -1;           // the dataset's seed (built-in task, eval split, order); -1 = seed
  // generation
  int64_t num_generations = 8;
  int64_t max_prompt_length = 512;
  int64_t max_completion_length = 256;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  double min_p = 0.0;
  std::vector<std::string> stop;    // stop strings
  // Extra variables for the model's chat template (TRL's chat_template_kwargs), e.g.
  // {"enable_thinking": false} for Qwen 3. A JSON object; applied to conversational prompts.
  nlohmann::json chat_template_kwargs = nlohmann::json::object();
  // optimisation
  double learning_rate = 1e-5;
  std::string lr_scheduler_type = "constant";
  double warmup_ratio = 0.0;
  int64_t max_steps = 100;
  int64_t num_train_epochs = 1;
  int64_t per_device_train_batch_size = 8;  // completions per micro-batch (token_budget <= 0)
  int64_t gradient_accumulation_steps = 1;
  int64_t prompts_per_step = 4;             // prompt groups per optimizer step
  double max_grad_norm = 1.0;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  int64_t num_iterations = 1;               // optimizer steps on each batch (TRL's mu)
  // GRPO loss
  std::string loss_type = "dapo";
  std::string scale_rewards = "group";
  std::string multi_objective_aggregation = "sum_then_normalize";  // or normalize_then_sum (GDPO)
  double epsilon = 0.2;
  std::optional<double> epsilon_high;  // None = epsilon
  double beta = 0.0;
  // TRL's other policy losses and off-policy knobs (docs/formulas.md, "Importance ratio" and
  // "Clipped surrogate"); names and defaults as TRL's GRPOConfig.
  std::string importance_sampling_level = "token";  // token | sequence (GSPO) | sequence_token
  std::optional<double> delta;         // two-sided clipping: the ratio's upper cap (None = off)
  double sapo_temperature_pos = 1.0;   // sapo: gate temperature where A > 0
  double sapo_temperature_neg = 1.05;  // sapo: where A <= 0
  double vespo_k_pos = 2.0, vespo_lambda_pos = 3.0;  // vespo: gamma weight where A >= 0
  double vespo_k_neg = 3.0, vespo_lambda_neg = 2.0;  // vespo: where A < 0
  bool mask_truncated_completions = false;
  bool use_bias_correction_kl = false;  // beta > 0: the k3 KL times the importance weight
  std::optional<double> off_policy_mask_threshold;  // OPSM (None = off)
  double top_entropy_quantile = 1.0;   // train only tokens at or above this entropy quantile (1 = all)
  double entropy_coef = 0.0;           // entropy bonus coefficient (0 = none)
  bool use_adaptive_entropy = false;   // move entropy_coef toward keeping entropy above entropy_target
  double entropy_coef_min = 0.0, entropy_coef_max = 1.0, entropy_coef_delta = 0.005, entropy_target = 0.2;
  // The proximal-policy correction (docs/formulas.md, "Off-policy correction"): TRL's names.
  bool vllm_importance_sampling_correction = false;
  std::string vllm_importance_sampling_mode = "sequence_mask";
  std::optional<double> vllm_importance_sampling_clip_max = 3.0;
  std::optional<double> vllm_importance_sampling_clip_min;
  int64_t token_budget = 0;            // > 0: padding-free packed rows of this many tokens
  bool share_prompts = true;           // a group's completions share one forward of its prompt
  bool gradient_checkpointing = false;
  double mfu_peak_tflops = 0;          // the device peak MFU divides by; 0 = measured at start
  // LoRA
  int64_t r = 8;
  double lora_alpha = 16;
  double lora_dropout = 0.0;
  nlohmann::json target_modules = "all-linear";
  bool use_rslora = false;
  std::string init_adapter;            // a PEFT adapter directory to start from ("" = fresh LoRA)
  // async engine
  int64_t max_staleness = 4;
  int64_t weight_sync_steps = 1;
  int64_t max_inflight_tasks = -1;     // -1: max(max_staleness,1) x batch x grad accumulation
  int64_t queue_maxsize = 1024;
  int64_t local_generators = 1;        // in-process generator threads (0: remote workers only)
  // workers (core/cluster): remote rollout workers reached over HTTP
  std::vector<std::string> worker_urls;  // http(s)://host:port of `grpo worker` or vLLM servers
  std::string cluster_token_file;      // "" = ~/.config/grpo-studio/cluster-token (made on first use)
  std::string cluster_tls_fingerprint; // https:// workers' certificate SHA-256 (comma-separated; "" = system CAs)
  bool discovery = false;              // listen for signed worker beacons
  std::string discovery_address = "239.255.77.42:29517";  // UDP multicast group:port of beacons
  double worker_timeout_s = 60;        // a completion request slower than this takes the worker out
  std::string worker_routing = "group";  // "group": our rules around the prefix proxy's; "prefix": its rules only
  std::string serve;                   // "HOST:PORT": the run's HTTP endpoint (workers join there); "" = none
  // workers launched through Slurm (core/cluster/slurm.h, core/run/worker_fleet.h)
  int64_t slurm_workers = 0;           // array tasks asked for at start (0: none)
  std::string slurm_partition, slurm_gres, slurm_mem, slurm_time_limit, slurm_account, slurm_qos;
  int64_t slurm_cpus_per_task = 0;     // 0: the partition's default
  std::vector<std::string> slurm_sbatch_options;  // more sbatch options, "--name[=value]" each
  std::vector<std::string> slurm_worker_args;     // more `grpo worker` flags, e.g. [--threads, "4"]
  std::string slurm_worker_listen = "0.0.0.0:0";  // where each worker listens on its node
  std::string slurm_worker_program;    // the grpo binary on the nodes ("" = this program's own path)
  std::string slurm_trainer_url;       // where workers join ("" = the serve endpoint's URL)
  std::string slurm_bin_dir;           // the folder of sbatch, squeue, scancel ("" = PATH)
  int64_t slurm_max_resubmits = 3;     // replacements of ended tasks over the run
  double slurm_poll_s = 10;            // how often squeue is asked
  int64_t slurm_drain_s = 120;         // Slurm signals a worker this long before its time limit (0: never)
  // rewards
  nlohmann::json reward_funcs = nlohmann::json::array({{{"name", "accuracy"}}});
  std::vector<double> reward_weights;  // empty = all 1
  // logging and saving
  int64_t logging_steps = 1;
  int64_t save_steps = 50;
  int64_t eval_steps = 25;
  // the Hub while training: TRL's keys (docs/hub.md, "Pushing while training"); the token is never
  // a key (HF_TOKEN or the huggingface_hub token file), so it never reaches a run's config.json
  bool push_to_hub = false;
  std::string hub_model_id;                 // namespace/name
  std::string hub_strategy = "every_save";  // end | every_save | checkpoint | all_checkpoints
  bool hub_private_repo = false;            // only when the repo is created by the run
  std::string hub_revision;                 // "" = main
  bool hub_always_push = false;             // a save while a push runs waits its turn instead of being skipped

  double epsilon_high_value() const { return epsilon_high.value_or(epsilon); }
  int64_t resolved_max_inflight_tasks() const;
  int64_t resolved_data_seed() const { return data_seed >= 0 ? data_seed : seed; }

  // Applies every key of `j` (an object) over the current values; `source` names the file.
  // Throws grpo::Error naming the source, the key, the value, and what is allowed.
  void apply(const nlohmann::json& j, const std::string& source);
  // Cross-field checks (e.g. a data source is given); throws naming `source`.
  void validate(const std::string& source) const;
  nlohmann::json to_json() const;  // every key, resolved
};

// Loads a .json, .yaml or .yml file into a JSON object (YAML scalars typed as YAML 1.2 core).
nlohmann::json load_config_file(const std::string& path);
// The same for text already in memory; `source` names it and its extension picks the parser.
nlohmann::json parse_config_text(const std::string& text, const std::string& source);
// load_config_file + TrainConfig::apply + validate.
TrainConfig load_train_config(const std::string& path);

// The key table of TrainConfig: one row per key of to_json(), in table order, under its group.
const std::vector<ConfigKeyInfo>& train_config_schema();

// All known keys, and whether a key may be changed on a live run (docs/ARCHITECTURE.md,
// "Retuning a live run"): thin wrappers over train_config_schema().
std::vector<std::string> config_keys();
bool is_retunable(const std::string& key);
// What a key may hold, worded as its errors word it ("[0, 1]", "> 0", "one of ..."); "" for an
// unknown key or one without a range (strings, lists, flags).
std::string config_key_range(const std::string& key);

// A running loop's one config: the engine, its trainer and its rollout pipeline hold the same
// immutable object; a retune builds the next one and hands the new pointer to each part at a step
// boundary (docs/ARCHITECTURE.md, "The config").
using SharedConfig = std::shared_ptr<const TrainConfig>;

}  // namespace grpo::grpo
