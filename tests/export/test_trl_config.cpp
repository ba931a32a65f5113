// TRL configs load as they are (issue 7, §2): a real-looking TRL AsyncGRPO + LoRA YAML (the
// ModelConfig / ScriptArguments / AsyncGRPOConfig / TrainingArguments keys that `trl` CLI configs
// mix), a GRPOConfig-style JSON with TRL's null defaults, and a PEFT adapter_config.json. Keys
// that exist in TRL or PEFT but not here are listed as ignored with a reason; renamed keys land
// on our names; settings that would change the maths (DoRA, a repetition penalty) and truly unknown
// keys are errors, the latter with the nearest known key.
#include <QtTest>

#include <algorithm>

#include "core/common/files.h"
#include "core/grpo/config.h"
#include "core/grpo/trl_keys.h"
#include "../common/error_of.h"

using grpo::grpo::TrainConfig;
using grpo::testing::error_of;
using json = nlohmann::json;

namespace {

const char* kTrlYaml = R"(# AsyncGRPO with LoRA, as in TRL's async GRPO docs and the hfjobs-lora-buckets recipe
model_name_or_path: Qwen/Qwen2.5-Math-1.5B
model_revision: main
torch_dtype: bfloat16
attn_implementation: kernels-community/flash-attn3
dataset_name: trl-lib/DeepMath-103K
dataset_train_split: train
use_peft: true
lora_r: 1
lora_alpha: 2
lora_dropout: 0.0
lora_target_modules: all-linear
output_dir: runs/async-grpo-lora
learning_rate: 4.0e-5
lr_scheduler_type: constant
warmup_ratio: 0.0
per_device_train_batch_size: 8
gradient_accumulation_steps: 6
num_generations: 8
max_completion_length: 3000
temperature: 1.0
epsilon: 0.2
epsilon_high: 0.28
max_staleness: 4
weight_sync_steps: 4
max_inflight_tasks: 384
queue_maxsize: 768
token_budget: 16384
gradient_checkpointing: false
bf16: true
logging_steps: 1
save_steps: 100
save_total_limit: 2
report_to: trackio
run_name: async-grpo-lora
vllm_server_base_url: http://localhost:8000
vllm_server_timeout: 240.0
request_timeout: 600
heartbeat_stale_after_s: 300.0
log_completions: true
num_completions_to_print: null
max_steps: 500
seed: 42
push_to_hub: false
fsdp: ""
)";

bool has_note(const std::vector<grpo::grpo::TrlNote>& notes, const std::string& key, const std::string& needle) {
  return std::any_of(notes.begin(), notes.end(),
                     [&](const auto& n) { return n.key == key && n.note.find(needle) != std::string::npos; });
}

grpo::grpo::TrlImport translate(const json& j) {
  const auto own = grpo::grpo::config_keys();
  return grpo::grpo::translate_trl_config(
      j, "test", [&](const std::string& k) { return std::find(own.begin(), own.end(), k) != own.end(); });
}

}  // namespace

class TestTrlConfig : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void trl_async_grpo_yaml_loads_as_is() {
    QTemporaryDir tmp;
    const std::string path = tmp.path().toStdString() + "/async_grpo.yaml";
    grpo::write_file_atomic(path, kTrlYaml);
    const json j = grpo::grpo::load_config_file(path);

    TrainConfig c;
    c.apply(j, path);  // no error
    QCOMPARE(c.r, int64_t(1));              // lora_r
    QCOMPARE(c.lora_alpha, 2.0);
    QCOMPARE(c.target_modules, json("all-linear"));  // lora_target_modules
    QCOMPARE(c.worker_timeout_s, 600.0);    // request_timeout
    QCOMPARE(c.learning_rate, 4e-5);
    QCOMPARE(c.max_completion_length, int64_t(3000));
    QCOMPARE(c.epsilon_high_value(), 0.28);
    QCOMPARE(c.token_budget, int64_t(16384));
    QCOMPARE(c.max_inflight_tasks, int64_t(384));
    QCOMPARE(c.queue_maxsize, int64_t(768));
    QCOMPARE(c.weight_sync_steps, int64_t(4));
    QCOMPARE(c.max_steps, int64_t(500));
    QCOMPARE(c.gradient_accumulation_steps, int64_t(6));
    // TRL trains on per_device_train_batch_size x gradient_accumulation_steps = 48 completions per
    // optimizer step: 6 groups of num_generations 8.
    QCOMPARE(c.prompts_per_step, int64_t(6));
    QCOMPARE(c.output_dir, std::string("runs/async-grpo-lora"));
    QCOMPARE(c.model_revision, std::string("main"));  // TRL's ModelConfig key, used for a Hub repo id

    // The listing says what is ignored and why.
    const auto t = translate(j);
    QVERIFY(has_note(t.translated, "lora_r", "read as \"r\""));
    QVERIFY(has_note(t.translated, "lora_target_modules", "read as \"target_modules\""));
    QVERIFY(has_note(t.translated, "request_timeout", "read as \"worker_timeout_s\""));
    QVERIFY(has_note(t.ignored, "bf16", "precision"));
    QVERIFY(has_note(t.ignored, "torch_dtype", "precision"));
    QVERIFY(has_note(t.ignored, "report_to", "metrics file and TensorBoard"));
    QCOMPARE(t.config["dataset_name"], json("trl-lib/DeepMath-103K"));  // ours now: a Hub dataset
    QCOMPARE(t.config["dataset_train_split"], json("train"));
    QVERIFY(has_note(t.ignored, "vllm_server_base_url", "worker_urls"));
    QVERIFY(has_note(t.ignored, "use_peft", "LoRA"));
    QVERIFY(has_note(t.ignored, "heartbeat_stale_after_s", ""));
    QCOMPARE(t.config["push_to_hub"], json(false));  // ours now (docs/hub.md, "Pushing while training")
    QCOMPARE(c.push_to_hub, false);
    QVERIFY(has_note(t.ignored, "fsdp", "single trainer"));
    const std::vector<std::string> ignored_keys = {
        "torch_dtype", "attn_implementation", "use_peft",
        "bf16", "save_total_limit", "report_to", "run_name", "vllm_server_base_url", "vllm_server_timeout",
        "heartbeat_stale_after_s", "log_completions", "num_completions_to_print", "fsdp"};
    QCOMPARE(t.ignored.size(), ignored_keys.size());
    for (const auto& k : ignored_keys)
      QVERIFY2(has_note(t.ignored, k, ""), k.c_str());
    for (const auto& n : t.ignored) QVERIFY2(!n.note.empty(), n.key.c_str());
    // Nothing TRL-only reaches TrainConfig; our own keys pass through untouched.
    for (const auto& [k, v] : t.config.items()) {
      const auto own = grpo::grpo::config_keys();
      QVERIFY2(std::find(own.begin(), own.end(), k) != own.end(), k.c_str());
    }
    QCOMPARE(t.config["learning_rate"], j["learning_rate"]);

    // dataset_name is the data source; a train_file beside it is refused as ambiguous.
    QCOMPARE(c.dataset_name, std::string("trl-lib/DeepMath-103K"));
    c.validate(path);
    c.apply({{"train_file", "train.jsonl"}}, "override");
    const std::string e = error_of([&] { c.validate(path); });
    QVERIFY2(e.find("either \"train_file\" or \"dataset_name\"") != std::string::npos, e.c_str());
  }

  void grpo_config_json_with_trl_nulls() {
    // GRPOConfig's to_dict() writes its unset fields as null; TRL's -1 max_steps means "by epochs".
    const json j = json::parse(R"({
      "output_dir": "out", "max_steps": -1, "num_train_epochs": 1.0, "max_prompt_length": null,
      "top_k": null, "min_p": null, "reward_weights": null, "eval_steps": null, "epsilon_high": null,
      "beta": 0.04, "loss_type": "dr_grpo", "scale_rewards": false, "num_iterations": 1,
      "importance_sampling_level": "token", "delta": null, "repetition_penalty": 1.0,
      "vllm_importance_sampling_correction": true, "vllm_importance_sampling_mode": "sequence_mask",
      "vllm_importance_sampling_cap": 3.0, "mask_truncated_completions": false,
      "top_entropy_quantile": 1.0, "use_liger_loss": false, "warmup_steps": 0, "optim": "adamw_torch",
      "lr_scheduler_kwargs": {}, "gradient_checkpointing_kwargs": null, "deepspeed": null
    })");
    TrainConfig c;
    c.apply(j, "grpo_config.json");
    const TrainConfig d;
    QCOMPARE(c.max_steps, d.max_steps);                  // -1 dropped
    QCOMPARE(c.max_prompt_length, d.max_prompt_length);  // null dropped
    QCOMPARE(c.top_k, d.top_k);
    QCOMPARE(c.min_p, d.min_p);
    QVERIFY(c.reward_weights.empty());
    QCOMPARE(c.eval_steps, d.eval_steps);
    QVERIFY(!c.epsilon_high.has_value());                // null is meaningful: = epsilon
    QCOMPARE(c.scale_rewards, std::string("none"));      // TRL's older boolean form
    QCOMPARE(c.loss_type, std::string("dr_grpo"));
    QCOMPARE(c.beta, 0.04);

    const auto t = translate(j);
    QVERIFY(has_note(t.ignored, "max_steps", "-1"));
    // TRL's proximal-policy correction is ours now, and its deprecated cap is clip_max.
    QVERIFY(c.vllm_importance_sampling_correction);
    QCOMPARE(c.vllm_importance_sampling_mode, std::string("sequence_mask"));
    QVERIFY(c.vllm_importance_sampling_clip_max.has_value() && *c.vllm_importance_sampling_clip_max == 3.0);
    QVERIFY(!c.vllm_importance_sampling_clip_min.has_value());
    QVERIFY(!has_note(t.ignored, "vllm_importance_sampling_correction", ""));
    QVERIFY(!has_note(t.ignored, "vllm_importance_sampling_cap", ""));
    // TRL 1.10+ dumps the deprecated cap as null beside clip_max: unset, not "no bound".
    const json newer = {{"vllm_importance_sampling_cap", nullptr}, {"vllm_importance_sampling_clip_max", 2.5}};
    TrainConfig n;
    n.apply(newer, "grpo_config.json");
    QVERIFY(n.vllm_importance_sampling_clip_max.has_value() && *n.vllm_importance_sampling_clip_max == 2.5);
    TrainConfig alone;
    alone.apply({{"vllm_importance_sampling_cap", nullptr}}, "grpo_config.json");
    QVERIFY(alone.vllm_importance_sampling_clip_max.has_value() && *alone.vllm_importance_sampling_clip_max == 3.0);
    QVERIFY(has_note(translate(newer).ignored, "vllm_importance_sampling_cap", "unset"));
    QCOMPARE(c.num_iterations, int64_t{1});  // a key of ours now, read as given
    TrainConfig seeded;
    seeded.apply({{"data_seed", nullptr}, {"seed", 3}}, "grpo_config.json");  // TRL's null: = seed
    QCOMPARE(seeded.resolved_data_seed(), int64_t{3});
    seeded.apply({{"data_seed", 11}}, "grpo_config.json");
    QCOMPARE(seeded.resolved_data_seed(), int64_t{11});
    QVERIFY(!has_note(t.ignored, "num_iterations", ""));
    QVERIFY(has_note(t.translated, "scale_rewards", "\"none\""));

    TrainConfig g;
    g.apply({{"scale_rewards", true}}, "x");
    QCOMPARE(g.scale_rewards, std::string("group"));
  }

  // TRL's Hub keys are ours (docs/hub.md, "Pushing while training"), its nulls keep our defaults,
  // and a token in a config is never taken: it would be written into the run's config.json.
  void trl_hub_keys_push_while_training() {
    const json j = json::parse(R"({
      "output_dir": "out", "task": "arith", "model_name_or_path": "tiny", "push_to_hub": true,
      "hub_model_id": "me/grpo-lora", "hub_strategy": "checkpoint",
      "hub_token": "hf_secret_in_a_config", "hub_private_repo": null, "hub_revision": null, "hub_always_push": false
    })");
    TrainConfig c;
    c.apply(j, "grpo_config.json");
    c.validate("grpo_config.json");
    QCOMPARE(c.push_to_hub, true);
    QCOMPARE(c.hub_model_id, std::string("me/grpo-lora"));
    QCOMPARE(c.hub_strategy, std::string("checkpoint"));
    QCOMPARE(c.hub_private_repo, false);
    QCOMPARE(c.hub_revision, std::string(""));
    QVERIFY(c.to_json().dump().find("hf_secret_in_a_config") == std::string::npos);
    const auto t = translate(j);
    QVERIFY(has_note(t.ignored, "hub_token", "never kept in a config"));
    QVERIFY(has_note(t.ignored, "hub_private_repo", "public"));
    QVERIFY(!t.config.contains("hub_token"));
    QCOMPARE(t.config["hub_strategy"], json("checkpoint"));
  }

  void trl_policy_losses_and_levels_load() {
    // TRL's other losses, GSPO and the two-sided clip are our keys under TRL's names and defaults.
    TrainConfig c;
    QCOMPARE(c.importance_sampling_level, std::string("token"));
    QVERIFY(!c.delta.has_value());
    QCOMPARE(c.sapo_temperature_pos, 1.0);
    QCOMPARE(c.sapo_temperature_neg, 1.05);
    QCOMPARE(c.vespo_k_pos, 2.0);
    QCOMPARE(c.vespo_lambda_pos, 3.0);
    QCOMPARE(c.vespo_k_neg, 3.0);
    QCOMPARE(c.vespo_lambda_neg, 2.0);
    c.apply(json::parse(R"({"loss_type": "sapo", "sapo_temperature_neg": 1.2, "importance_sampling_level": "sequence",
                            "delta": 1.4, "vespo_k_pos": 1.5})"), "grpo_config.json");
    QCOMPARE(c.loss_type, std::string("sapo"));
    QCOMPARE(c.sapo_temperature_neg, 1.2);
    QCOMPARE(c.importance_sampling_level, std::string("sequence"));
    QCOMPARE(c.delta.value_or(0), 1.4);
    QCOMPARE(c.vespo_k_pos, 1.5);
    QVERIFY(translate(json{{"delta", 1.4}}).ignored.empty());
    for (const char* k : {"loss_type", "importance_sampling_level", "delta", "sapo_temperature_pos", "vespo_lambda_neg"})
      QVERIFY2(grpo::grpo::is_retunable(k) == (std::string(k) != "loss_type" && std::string(k) != "importance_sampling_level"), k);
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"importance_sampling_level", "sentence"}}, "run.yaml"); }),
                         "importance_sampling_level", "sequence_token");
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"sapo_temperature_pos", 0}}, "run.yaml"); }), "sapo_temperature_pos");
  }

  void peft_adapter_config_loads() {
    // adapter_config.json as PeftModel.save_pretrained writes it, newer keys included
    // (docs/formats.md, "adapter_config.json as read").
    const json j = json::parse(R"({
      "alpha_pattern": {}, "auto_mapping": null, "base_model_name_or_path": "Qwen/Qwen2.5-0.5B",
      "bias": "none", "corda_config": null, "eva_config": null, "exclude_modules": null,
      "fan_in_fan_out": false, "inference_mode": true, "init_lora_weights": true,
      "layer_replication": null, "layers_pattern": null, "layers_to_transform": null,
      "loftq_config": {}, "lora_alpha": 32, "lora_bias": false, "lora_dropout": 0.05,
      "megatron_config": null, "megatron_core": "megatron.core", "modules_to_save": null,
      "peft_type": "LORA", "peft_version": "0.17.1", "qalora_group_size": 16, "r": 16,
      "rank_pattern": {}, "revision": null, "target_modules": ["v_proj", "q_proj"],
      "target_parameters": null, "task_type": "CAUSAL_LM", "trainable_token_indices": null,
      "use_dora": false, "use_qalora": false, "use_rslora": true, "alora_invocation_tokens": null,
      "ensure_weight_tying": false
    })");
    TrainConfig c;
    c.apply(j, "adapter_config.json");
    QCOMPARE(c.r, int64_t(16));
    QCOMPARE(c.lora_alpha, 32.0);
    QCOMPARE(c.lora_dropout, 0.05);
    QVERIFY(c.use_rslora);
    QCOMPARE(c.target_modules, json::array({"v_proj", "q_proj"}));
    const auto t = translate(j);
    QVERIFY(has_note(t.ignored, "peft_type", "LoRA"));
    QVERIFY(has_note(t.ignored, "use_dora", "DoRA"));
    QVERIFY(has_note(t.ignored, "peft_version", "informational"));

    TrainConfig n;  // PEFT's null target_modules = the architecture default
    n.apply({{"target_modules", nullptr}}, "x");
    QCOMPARE(n.target_modules, json::array({"q_proj", "v_proj"}));
  }

  void settings_that_change_the_maths_are_errors() {
    TrainConfig c;
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"use_dora", true}}, "cfg.yaml"); }), "cfg.yaml", "use_dora",
                         "DoRA is not supported", "set it to null or false");
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"repetition_penalty", 1.2}}, "cfg.yaml"); }), "repetition_penalty",
                         "value 1.2 is not supported", "no repetition penalty");
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"num_iterations", 0}}, "cfg.yaml"); }), "cfg.yaml", "num_iterations");
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"bias", "all"}}, "cfg.yaml"); }), "bias", "\"none\"");
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"use_peft", false}}, "cfg.yaml"); }), "use_peft", "always LoRA");
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"warmup_steps", 10}}, "cfg.yaml"); }), "warmup_steps", "warmup_ratio");
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"lora_r", 16}, {"r", 8}}, "cfg.yaml"); }), "lora_r", "\"r\"",
                         "different values");
    // The same value under both names is fine.
    c.apply({{"lora_r", 16}, {"r", 16}}, "cfg.yaml");
    QCOMPARE(c.r, int64_t(16));
    // All or nothing: a failed apply leaves the config as it was.
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"r", 4}, {"use_dora", true}}, "cfg.yaml"); }), "use_dora");
    QCOMPARE(c.r, int64_t(16));
  }

  // TRL's step size (per_device_train_batch_size x gradient_accumulation_steps completions) becomes
  // prompts_per_step when only TRL's keys give it; our own key wins when both are there.
  void gradient_accumulation_sets_the_step_size() {
    TrainConfig c;
    c.apply({{"per_device_train_batch_size", 4}, {"gradient_accumulation_steps", 4}, {"num_generations", 8}}, "trl.yaml");
    QCOMPARE(c.prompts_per_step, int64_t(2));
    QCOMPARE(c.per_device_train_batch_size, int64_t(4));  // still the micro-batch size
    // TRL's defaults (per_device_train_batch_size 8, num_generations 8) are ours too.
    TrainConfig d;
    d.apply({{"gradient_accumulation_steps", 3}}, "trl.yaml");
    QCOMPARE(d.prompts_per_step, int64_t(3));
    // Not a whole number of groups: TRL refuses it too; nothing changes.
    TrainConfig e;
    CHECK_ERROR_CONTAINS(error_of([&] { e.apply({{"per_device_train_batch_size", 6}, {"gradient_accumulation_steps", 1}}, "trl.yaml"); }),
                         "trl.yaml", "gradient_accumulation_steps", "6 completions per optimizer step",
                         "num_generations (8)", "set prompts_per_step");
    QCOMPARE(e.per_device_train_batch_size, int64_t(8));
    QCOMPARE(e.prompts_per_step, int64_t(4));
    // Both given: prompts_per_step stays (a run folder's config.json has both).
    TrainConfig f;
    f.apply({{"gradient_accumulation_steps", 6}, {"prompts_per_step", 5}}, "run.yaml");
    QCOMPARE(f.prompts_per_step, int64_t(5));
    TrainConfig g;
    g.apply(f.to_json(), "config.json");
    QCOMPARE(g.prompts_per_step, int64_t(5));
    QCOMPARE(g.gradient_accumulation_steps, int64_t(6));
    // A default config's config.json (gradient_accumulation_steps 1) reads back unchanged.
    TrainConfig h;
    TrainConfig back;
    back.apply(h.to_json(), "config.json");
    QCOMPARE(back.prompts_per_step, h.prompts_per_step);
    // The sizes are bounded, so their products cannot overflow.
    CHECK_ERROR_CONTAINS(error_of([&] { e.apply({{"gradient_accumulation_steps", int64_t(1) << 40}}, "trl.yaml"); }),
                         "gradient_accumulation_steps");
    CHECK_ERROR_CONTAINS(error_of([&] { e.apply({{"prompts_per_step", int64_t(1) << 40}}, "trl.yaml"); }),
                         "prompts_per_step");
  }

  void unknown_keys_are_errors_with_the_nearest_key() {
    TrainConfig c;
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"num_generation", 8}}, "run.yaml"); }), "run.yaml",
                         "unknown key \"num_generation\"", "did you mean \"num_generations\"?");
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"learning_rte", 1e-5}}, "run.yaml"); }),
                         "did you mean \"learning_rate\"?");
    // A TRL value error still names the key and the allowed values.
    CHECK_ERROR_CONTAINS(error_of([&] { c.apply({{"loss_type", "ppo"}}, "run.yaml"); }), "loss_type", "\"ppo\"",
                         "one of", "vespo");
  }

  void the_table_has_no_duplicates() {
    auto keys = grpo::grpo::trl_known_keys();
    std::sort(keys.begin(), keys.end());
    QVERIFY(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
    QVERIFY(keys.size() > 150);
  }
};

QTEST_GUILESS_MAIN(TestTrlConfig)
#include "test_trl_config.moc"
