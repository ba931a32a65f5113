// The TRL / PEFT key table and the translation onto TrainConfig's keys. Sources: trl
// GRPOConfig, experimental AsyncGRPOConfig, ModelConfig, ScriptArguments; transformers
// TrainingArguments; peft LoraConfig (docs/ARCHITECTURE.md, "The config"; what differs from TRL:
// docs/formulas.md, "Differences from TRL"; PEFT keys: docs/formats.md, "adapter_config.json as
// read").
#include "core/grpo/trl_keys.h"

#include <algorithm>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/grpo/config.h"
#include "core/io/hf_config.h"

namespace grpo::grpo {
namespace {

using json = nlohmann::json;

enum class Kind {
  Ignore,    // any value is accepted and has no effect here
  Neutral,   // accepted only at a value that means "off" here; any other value is an error
  Rename,    // the same setting under our name: an alias in the key table (config.cpp)
  Sentinel,  // one of our keys: these TRL values mean "unset", so our default stays
};

struct TrlKey {
  const char* name;
  Kind kind;
  const char* text;           // Ignore/Neutral/Sentinel: the reason; Rename: our key
  std::vector<json> neutral;  // Neutral/Sentinel: the accepted values (null always included for Neutral)
};

// Shared reasons.
const char* kPrecision = "device and precision are chosen by the engine (CUDA: bfloat16, CPU: float32)";
const char* kDistributed = "a single trainer process: no DDP, FSDP or DeepSpeed";
const char* kLogging = "metrics go to the run's metrics file and TensorBoard event files in the run directory";
const char* kHub = "TRL's older spelling; use push_to_hub and hub_model_id (namespace/name); the token comes from HF_TOKEN or the huggingface_hub token file";
const char* kVllm = "generation runs in-process or on workers (worker_urls); a vLLM server can be a worker";
const char* kLoader = "no DataLoader: prompt groups stream from the dataset inside the engine";
const char* kSave = "a checkpoint is written every save_steps into checkpoints/ (the newest few kept) in safetensors";
const char* kEval = "greedy evaluation runs every eval_steps on the held-out split";
const char* kKernels = "LibTorch has no torch.compile, Liger or kernel-hub options";
const char* kModelLoad = "the model directory is read as is: safetensors weights of a built-in architecture";
const char* kNoRef = "with beta > 0 the reference is the base model without the adapter; it is never synced";
const char* kTurns = "rollouts are single-turn completions";

const std::vector<TrlKey>& trl_key_table() {
  // Said from the loader's own list, so the note cannot fall behind a new architecture.
  static const std::string kRemoteCode = "the built-in architectures (" + join(io::supported_model_types(), ", ") +
                                         ") are loaded from their safetensors; no remote code runs";
  static const std::string kModulesToSave =
      "a new adapter trains LoRA matrices only, no modules_to_save (full copies of lm_head / embed_tokens, which vLLM "
      "refuses); an imported PEFT adapter that has them is read with them";
  static const std::vector<TrlKey> t = {
      // ---- TRL ModelConfig / ScriptArguments (trl <cmd> --config x.yaml) ----
      // (lora_r, lora_target_modules, request_timeout: aliases in the key table of config.cpp)
      {"lora_modules_to_save", Kind::Neutral, kModulesToSave.c_str(), {json::array()}},
      {"lora_task_type", Kind::Neutral, "only causal LM adapters are trained", {"CAUSAL_LM"}},
      {"use_peft", Kind::Neutral, "training is always LoRA (use_peft: false, full fine-tuning, is not supported)", {true}},
      {"torch_dtype", Kind::Ignore, kPrecision, {}},
      {"dtype", Kind::Ignore, kPrecision, {}},
      {"trust_remote_code", Kind::Ignore, kRemoteCode.c_str(), {}},
      {"attn_implementation", Kind::Ignore, "attention is the engine's own (packed, padding-free on CPU)", {}},
      {"load_in_8bit", Kind::Neutral, "quantized (bitsandbytes) base models are not supported", {false}},
      {"load_in_4bit", Kind::Neutral, "quantized (bitsandbytes) base models are not supported", {false}},
      {"bnb_4bit_quant_type", Kind::Ignore, "quantized (bitsandbytes) base models are not supported", {}},
      {"use_bnb_nested_quant", Kind::Ignore, "quantized (bitsandbytes) base models are not supported", {}},
      {"dataset_streaming", Kind::Ignore, "Parquet datasets are read one row group at a time already", {}},
      {"gradient_checkpointing_use_reentrant", Kind::Ignore, "gradient_checkpointing decides; there is no re-entrant variant", {}},
      {"ignore_bias_buffers", Kind::Ignore, kDistributed, {}},
      // ---- PEFT LoraConfig (adapter_config.json) ----
      {"peft_type", Kind::Neutral, "only LoRA adapters are trained", {"LORA"}},
      {"task_type", Kind::Neutral, "only causal LM adapters are trained", {"CAUSAL_LM"}},
      {"base_model_name_or_path", Kind::Ignore, "the base model is model_name_or_path", {}},
      {"revision", Kind::Ignore, "the base model's revision is model_revision", {}},
      {"inference_mode", Kind::Ignore, "the adapter is trainable during a run and saved with inference_mode true", {}},
      {"bias", Kind::Neutral, "trained biases are not supported (vLLM requires bias \"none\")", {"none"}},
      {"use_dora", Kind::Neutral, "DoRA is not supported (vLLM rejects it too)", {false}},
      {"modules_to_save", Kind::Neutral, kModulesToSave.c_str(), {json::array()}},
      {"fan_in_fan_out", Kind::Neutral, "Conv1D (GPT-2 style) layers are not supported", {false}},
      {"init_lora_weights", Kind::Neutral, "A is Kaiming-uniform and B zero (PEFT's default, the only init vLLM accepts)", {true}},
      {"layers_to_transform", Kind::Neutral, "every layer is adapted", {json::array()}},
      {"layers_pattern", Kind::Ignore, "every layer is adapted", {}},
      {"rank_pattern", Kind::Neutral, "one rank for every module", {json::object()}},
      {"alpha_pattern", Kind::Neutral, "one lora_alpha for every module", {json::object()}},
      {"exclude_modules", Kind::Neutral, "target_modules lists the adapted projections", {json::array()}},
      {"megatron_config", Kind::Ignore, kDistributed, {}},
      {"megatron_core", Kind::Ignore, kDistributed, {}},
      {"loftq_config", Kind::Neutral, "LoftQ initialisation is not supported", {json::object()}},
      {"eva_config", Kind::Neutral, "EVA initialisation is not supported", {json::object()}},
      {"corda_config", Kind::Neutral, "CorDA initialisation is not supported", {json::object()}},
      {"layer_replication", Kind::Neutral, "layer replication is not supported (vLLM rejects it too)", {json::array()}},
      {"lora_bias", Kind::Neutral, "a bias on lora_B is not supported (vLLM rejects it too)", {false}},
      {"trainable_token_indices", Kind::Neutral, "embedding rows are not trained", {json::array()}},
      {"target_parameters", Kind::Neutral, "target_modules lists the adapted projections", {json::array()}},
      {"alora_invocation_tokens", Kind::Neutral, "activated LoRA is not supported (vLLM rejects it too)", {json::array()}},
      {"use_qalora", Kind::Neutral, "QA-LoRA is not supported", {false}},
      {"qalora_group_size", Kind::Ignore, "QA-LoRA is not supported", {}},
      {"ensure_weight_tying", Kind::Ignore, "embeddings are not adapted, so tying is unchanged", {}},
      {"peft_version", Kind::Ignore, "informational", {}},
      {"auto_mapping", Kind::Ignore, "task_type says the model class", {}},
      {"runtime_config", Kind::Ignore, "informational", {}},
      // ---- GRPOConfig ----
      {"num_generations_eval", Kind::Ignore, kEval, {}},
      {"ds3_gather_for_generation", Kind::Ignore, kDistributed, {}},
      {"shuffle_dataset", Kind::Ignore, "the dataset stream is always shuffled with seed", {}},
      {"generation_batch_size", Kind::Ignore, "prompts_per_step x num_generations completions are sampled per step", {}},
      {"steps_per_generation", Kind::Ignore, "prompts_per_step x num_generations completions are sampled per step", {}},
      {"generation_kwargs", Kind::Ignore, "sampling uses temperature, top_p, top_k, min_p, stop", {}},
      {"repetition_penalty", Kind::Neutral, "the sampler has no repetition penalty", {1.0}},
      {"use_transformers_paged", Kind::Ignore, kVllm, {}},
      {"cache_implementation", Kind::Ignore, "the engine's KV cache with prefix sharing is used", {}},
      {"use_vllm", Kind::Ignore, kVllm, {}},
      {"vllm_mode", Kind::Ignore, kVllm, {}},
      {"vllm_model_impl", Kind::Ignore, kVllm, {}},
      {"vllm_enable_sleep_mode", Kind::Ignore, kVllm, {}},
      {"vllm_guided_decoding_regex", Kind::Neutral, "guided decoding is not supported", {}},
      {"vllm_structured_outputs_regex", Kind::Neutral, "structured outputs are not supported", {}},
      {"vllm_server_base_url", Kind::Ignore, "set worker_urls to use vLLM servers (or grpo worker) as rollout workers", {}},
      {"vllm_server_host", Kind::Ignore, "set worker_urls to use vLLM servers (or grpo worker) as rollout workers", {}},
      {"vllm_server_port", Kind::Ignore, "set worker_urls to use vLLM servers (or grpo worker) as rollout workers", {}},
      {"vllm_server_timeout", Kind::Ignore, "workers are probed continuously; worker_timeout_s bounds a request", {}},
      {"vllm_group_port", Kind::Ignore, "weights reach workers as adapter files, never over NCCL", {}},
      {"vllm_gpu_memory_utilization", Kind::Ignore, kVllm, {}},
      {"vllm_max_model_length", Kind::Ignore, kVllm, {}},
      {"vllm_tensor_parallel_size", Kind::Ignore, kVllm, {}},
      // (num_iterations, delta, importance_sampling_level, sapo_temperature_*, vespo_*, the entropy, off-policy and
      // vllm_importance_sampling_* keys: keys of the key table)
      {"sync_ref_model", Kind::Neutral, kNoRef, {false}},
      {"ref_model_mixup_alpha", Kind::Ignore, kNoRef, {}},
      {"ref_model_sync_steps", Kind::Ignore, kNoRef, {}},
      {"disable_dropout", Kind::Ignore, "the only dropout is lora_dropout", {}},
      {"cast_lm_head_to_fp32", Kind::Ignore, "logits are computed in float32 already", {}},
      {"use_liger_loss", Kind::Ignore, kKernels, {}},
      {"log_completions", Kind::Ignore, "completions are always written to the run's samples file", {}},
      {"num_completions_to_print", Kind::Ignore, "completions are always written to the run's samples file", {}},
      {"wandb_log_unique_prompts", Kind::Ignore, kLogging, {}},
      {"log_unique_prompts", Kind::Ignore, kLogging, {}},
      {"log_completions_hub_repo", Kind::Ignore, "completions are logged in the run folder (its samples file), not pushed to a dataset repo", {}},
      {"max_tool_calling_iterations", Kind::Ignore, kTurns, {}},
      {"reward_model_path", Kind::Neutral, "reward models are external reward functions (reward_funcs)", {}},
      // ---- AsyncGRPOConfig ----
      {"model_init_kwargs", Kind::Ignore, kModelLoad, {}},
      {"router_aux_loss_coef", Kind::Ignore, "dense models only (no MoE router loss)", {}},
      {"fork_threshold_tokens", Kind::Ignore, kTurns, {}},
      {"heartbeat_stale_after_s", Kind::Ignore, "generators run in-process or report through the router; worker_timeout_s bounds a request", {}},
      // ---- transformers TrainingArguments ----
      {"overwrite_output_dir", Kind::Ignore, "runs never overwrite each other's files; --resume continues one", {}},
      {"do_train", Kind::Ignore, "grpo train trains", {}},
      {"do_eval", Kind::Ignore, kEval, {}},
      {"do_predict", Kind::Ignore, kEval, {}},
      {"eval_strategy", Kind::Ignore, kEval, {}},
      {"evaluation_strategy", Kind::Ignore, kEval, {}},
      {"prediction_loss_only", Kind::Ignore, kEval, {}},
      {"per_device_eval_batch_size", Kind::Ignore, kEval, {}},
      {"eval_accumulation_steps", Kind::Ignore, kEval, {}},
      {"eval_delay", Kind::Ignore, kEval, {}},
      {"eval_on_start", Kind::Ignore, kEval, {}},
      {"eval_do_concat_batches", Kind::Ignore, kEval, {}},
      {"batch_eval_metrics", Kind::Ignore, kEval, {}},
      {"include_inputs_for_metrics", Kind::Ignore, kEval, {}},
      {"include_for_metrics", Kind::Ignore, kEval, {}},
      {"metric_for_best_model", Kind::Ignore, kEval, {}},
      {"greater_is_better", Kind::Ignore, kEval, {}},
      {"load_best_model_at_end", Kind::Ignore, kSave, {}},
      {"torch_empty_cache_steps", Kind::Ignore, kPrecision, {}},
      {"lr_scheduler_kwargs", Kind::Neutral, "schedulers take no extra arguments", {json::object()}},
      {"warmup_steps", Kind::Neutral, "warmup is given as warmup_ratio (= warmup_steps / max_steps)", {0}},
      {"log_level", Kind::Ignore, "GRPO_LOG_LEVEL sets the log level", {}},
      {"log_level_replica", Kind::Ignore, kDistributed, {}},
      {"log_on_each_node", Kind::Ignore, kDistributed, {}},
      {"logging_dir", Kind::Ignore, kLogging, {}},
      {"logging_strategy", Kind::Ignore, kLogging, {}},
      {"logging_first_step", Kind::Ignore, kLogging, {}},
      {"logging_nan_inf_filter", Kind::Ignore, kLogging, {}},
      {"report_to", Kind::Ignore, kLogging, {}},
      {"run_name", Kind::Ignore, "the run is named by its directory (output_dir)", {}},
      {"disable_tqdm", Kind::Ignore, "grpo train draws its own progress line", {}},
      {"include_tokens_per_second", Kind::Ignore, kLogging, {}},
      {"include_num_input_tokens_seen", Kind::Ignore, kLogging, {}},
      {"skip_memory_metrics", Kind::Ignore, kLogging, {}},
      {"save_strategy", Kind::Ignore, kSave, {}},
      {"save_total_limit", Kind::Ignore, kSave, {}},
      {"save_safetensors", Kind::Ignore, kSave, {}},
      {"save_on_each_node", Kind::Ignore, kSave, {}},
      {"save_only_model", Kind::Ignore, kSave, {}},
      {"restore_callback_states_from_checkpoint", Kind::Ignore, kSave, {}},
      {"resume_from_checkpoint", Kind::Ignore, "use `grpo train --resume RUN_DIR`", {}},
      {"ignore_data_skip", Kind::Ignore, "resume restores the dataset cursor from the checkpoint", {}},
      {"no_cuda", Kind::Ignore, kPrecision, {}},
      {"use_cpu", Kind::Ignore, kPrecision, {}},
      {"use_mps_device", Kind::Ignore, kPrecision, {}},
      {"bf16", Kind::Ignore, kPrecision, {}},
      {"fp16", Kind::Ignore, kPrecision, {}},
      {"tf32", Kind::Ignore, kPrecision, {}},
      {"fp16_opt_level", Kind::Ignore, kPrecision, {}},
      {"half_precision_backend", Kind::Ignore, kPrecision, {}},
      {"bf16_full_eval", Kind::Ignore, kPrecision, {}},
      {"fp16_full_eval", Kind::Ignore, kPrecision, {}},

      {"full_determinism", Kind::Ignore, "seed drives sampling and initialisation", {}},
      {"jit_mode_eval", Kind::Ignore, kKernels, {}},
      {"use_ipex", Kind::Ignore, kKernels, {}},
      {"torch_compile", Kind::Ignore, kKernels, {}},
      {"torch_compile_backend", Kind::Ignore, kKernels, {}},
      {"torch_compile_mode", Kind::Ignore, kKernels, {}},
      {"torchdynamo", Kind::Ignore, kKernels, {}},
      {"use_liger_kernel", Kind::Ignore, kKernels, {}},
      {"liger_kernel_config", Kind::Ignore, kKernels, {}},
      {"local_rank", Kind::Ignore, kDistributed, {}},
      {"ddp_backend", Kind::Ignore, kDistributed, {}},
      {"ddp_find_unused_parameters", Kind::Ignore, kDistributed, {}},
      {"ddp_bucket_cap_mb", Kind::Ignore, kDistributed, {}},
      {"ddp_broadcast_buffers", Kind::Ignore, kDistributed, {}},
      {"ddp_timeout", Kind::Ignore, kDistributed, {}},
      {"tpu_num_cores", Kind::Ignore, kDistributed, {}},
      {"fsdp", Kind::Ignore, kDistributed, {}},
      {"fsdp_config", Kind::Ignore, kDistributed, {}},
      {"deepspeed", Kind::Ignore, kDistributed, {}},
      {"accelerator_config", Kind::Ignore, kDistributed, {}},
      {"dispatch_batches", Kind::Ignore, kDistributed, {}},
      {"split_batches", Kind::Ignore, kDistributed, {}},
      {"average_tokens_across_devices", Kind::Ignore, kDistributed, {}},
      {"ray_scope", Kind::Ignore, kDistributed, {}},
      {"dataloader_drop_last", Kind::Ignore, kLoader, {}},
      {"dataloader_num_workers", Kind::Ignore, kLoader, {}},
      {"dataloader_prefetch_factor", Kind::Ignore, kLoader, {}},
      {"dataloader_pin_memory", Kind::Ignore, kLoader, {}},
      {"dataloader_persistent_workers", Kind::Ignore, kLoader, {}},
      {"remove_unused_columns", Kind::Ignore, kLoader, {}},
      {"group_by_length", Kind::Ignore, kLoader, {}},
      {"length_column_name", Kind::Ignore, kLoader, {}},
      {"label_names", Kind::Ignore, kLoader, {}},
      {"past_index", Kind::Ignore, kLoader, {}},
      {"auto_find_batch_size", Kind::Ignore, "token_budget or per_device_train_batch_size sizes micro-batches", {}},
      {"label_smoothing_factor", Kind::Neutral, "GRPO has no label smoothing", {0.0}},
      {"optim", Kind::Neutral, "the optimizer is AdamW (adam_beta1/2, adam_epsilon, weight_decay)",
       {"adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw"}},
      {"optim_args", Kind::Ignore, "the optimizer is AdamW (adam_beta1/2, adam_epsilon, weight_decay)", {}},
      {"optim_target_modules", Kind::Ignore, "the optimizer is AdamW over the LoRA parameters", {}},
      {"adafactor", Kind::Neutral, "the optimizer is AdamW", {false}},
      {"neftune_noise_alpha", Kind::Neutral, "NEFTune noise is not supported", {}},
      // (push_to_hub, hub_model_id, hub_strategy, hub_private_repo, hub_revision, hub_always_push:
      // keys of ours, docs/hub.md "Pushing while training")
      {"hub_token", Kind::Ignore, "a token is never kept in a config (it would be written into the run's config.json): HF_TOKEN or the huggingface_hub token file", {}},
      {"push_to_hub_model_id", Kind::Ignore, kHub, {}},
      {"push_to_hub_organization", Kind::Ignore, kHub, {}},
      {"push_to_hub_token", Kind::Ignore, kHub, {}},
      {"gradient_checkpointing_kwargs", Kind::Ignore, "gradient_checkpointing decides; there is no re-entrant variant", {}},
      // ---- TRL values that mean "unset" for keys TrainConfig has ----
      {"max_steps", Kind::Sentinel, "TRL's -1 (train by epochs): max_steps keeps its default", {-1}},
      {"data_seed", Kind::Sentinel, "TRL's null (= seed): data_seed keeps its default", {}},
      {"max_prompt_length", Kind::Sentinel, "TRL's null (no truncation): max_prompt_length keeps its default", {}},
      {"max_completion_length", Kind::Sentinel, "null: max_completion_length keeps its default", {}},
      {"token_budget", Kind::Sentinel, "TRL's null (the server's max_model_len): token_budget keeps its default", {}},
      {"min_p", Kind::Sentinel, "TRL's null: no min-p filter", {}},
      {"top_k", Kind::Sentinel, "TRL's null: no top-k filter", {}},
      {"eval_steps", Kind::Sentinel, "TRL's null (= logging_steps): eval_steps keeps its default", {}},
      {"save_steps", Kind::Sentinel, "null: save_steps keeps its default", {}},
      {"reward_weights", Kind::Sentinel, "TRL's null: every reward function weighs 1", {}},
      {"hub_model_id", Kind::Sentinel, "TRL's null (the output folder's name under the token's user): hub_model_id keeps its default, and push_to_hub needs it set", {}},
      {"hub_revision", Kind::Sentinel, "TRL's null: the push goes to main", {}},
      {"hub_private_repo", Kind::Sentinel, "TRL's null (the organization's default visibility): a new repo is public", {}},
  };
  return t;
}

const TrlKey* find_key(const std::string& name) {
  for (const auto& k : trl_key_table())
    if (name == k.name) return &k;
  return nullptr;
}

bool is_neutral(const TrlKey& k, const json& v) {
  if (v.is_null()) return true;  // an unset TRL/PEFT field never changes anything
  if (k.kind == Kind::Neutral && ((v.is_array() || v.is_object()) && v.empty())) return true;
  for (const auto& n : k.neutral) {
    if (v == n) return true;
    if (v.is_number() && n.is_number() && v.get<double>() == n.get<double>()) return true;
  }
  return false;
}

std::string allowed_text(const TrlKey& k) {
  std::vector<std::string> parts = {"null"};
  for (const auto& n : k.neutral) parts.push_back(n.dump());
  return join(parts, " or ");
}

}  // namespace

TrlImport translate_trl_config(const json& j, const std::string& source,
                               const std::function<bool(const std::string&)>& is_own_key) {
  check(j.is_object(), source, std::string("expected a JSON/YAML object of settings, got ") + j.type_name());
  TrlImport out;
  for (const auto& [key, value] : j.items()) {
    const TrlKey* k = find_key(key);
    TrlKey alias{key.c_str(), Kind::Rename, nullptr, {}};  // a TRL spelling the key table lists
    if (const ConfigKeyInfo* own = k ? nullptr : find_config_key(train_config_schema(), key, true);
        own && own->name != key) {
      alias.text = own->name.c_str();
      k = &alias;
    }
    const bool ours = is_own_key(key);
    if (!k || (ours && k->kind != Kind::Sentinel) || (k->kind == Kind::Sentinel && !is_neutral(*k, value))) {
      // One of ours (or unknown: apply() names the nearest key). TRL's scale_rewards was a bool
      // before it took "group"/"batch"/"none".
      if (key == "scale_rewards" && value.is_boolean()) {
        out.config[key] = value.get<bool>() ? "group" : "none";
        out.translated.push_back({key, value, std::string("became \"") + out.config[key].get<std::string>() +
                                                  "\" (TRL's older boolean form)"});
        continue;
      }
      if (key == "target_modules" && value.is_null()) {  // PEFT: the architecture's default
        out.config[key] = json::array({"q_proj", "v_proj"});
        out.translated.push_back({key, value, "became [\"q_proj\", \"v_proj\"] (PEFT's default for Llama/Qwen)"});
        continue;
      }
      out.config[key] = value;
      continue;
    }
    switch (k->kind) {
      case Kind::Ignore:
        out.ignored.push_back({key, value, k->text});
        break;
      case Kind::Sentinel: {  // the value that stays is the key table's default
        const ConfigKeyInfo* own = find_config_key(train_config_schema(), key);
        out.ignored.push_back({key, value, std::string(k->text) + (own ? " (default " + own->default_value.dump() + ")" : "")});
        break;
      }
      case Kind::Neutral:
        if (!is_neutral(*k, value))
          throw Error(source, "key \"" + key + "\": value " + value.dump() + " is not supported: " + k->text,
                      "remove the key or set it to " + allowed_text(*k));
        out.ignored.push_back({key, value, k->text});
        break;
      case Kind::Rename: {
        const std::string target = k->text;
        // TRL writes a deprecated spelling it no longer reads as null beside the new key
        // (vllm_importance_sampling_cap: null with vllm_importance_sampling_clip_max: 3.0): unset.
        if (value.is_null() && target != "target_modules") {
          out.ignored.push_back({key, value, "TRL's null: unset (\"" + target + "\" keeps its value)"});
          break;
        }
        if (j.contains(target) && j[target] != value)
          throw Error(source, "keys \"" + key + "\" (" + value.dump() + ") and \"" + target + "\" (" +
                                  j[target].dump() + ") set the same thing to different values",
                      "keep one of them");
        if (target == "target_modules" && value.is_null()) out.config[target] = json::array({"q_proj", "v_proj"});
        else out.config[target] = value;
        out.translated.push_back({key, value, "read as \"" + target + "\""});
        break;
      }
    }
  }
  return out;
}

std::vector<std::string> trl_known_keys() {
  std::vector<std::string> keys;
  for (const auto& k : trl_key_table()) keys.push_back(k.name);
  for (const auto& k : train_config_schema()) keys.insert(keys.end(), k.aliases.begin(), k.aliases.end());
  return keys;
}

}  // namespace grpo::grpo
