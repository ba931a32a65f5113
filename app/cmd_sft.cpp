// `grpo sft` (supervised fine-tuning, LoRA or full, on JSONL pairs or the arithmetic task) and
// `grpo init-model` (a randomly initialised Hugging Face checkpoint). Options only; the work is
// core/run/sft.h. CLI options override the config file's keys (same names as the file).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/grpo/config.h"
#include "core/grpo/config_schema.h"
#include "core/run/sft.h"

namespace grpo::cli {
namespace {

void print_log(const run::SftLog& l) {
  char line[256];
  std::snprintf(line, sizeof line, "sft step %lld/%lld loss %.4f lr %.3g grad_norm %.3f %.0f tok/s epoch %.2f elapsed %.1fs",
                static_cast<long long>(l.step), static_cast<long long>(l.max_steps), l.loss, l.learning_rate, l.grad_norm,
                l.tokens_per_s, l.epoch, l.elapsed_s);
  std::cout << line;
  if (l.eval_accuracy >= 0) {
    std::snprintf(line, sizeof line, " eval_acc %.3f", l.eval_accuracy);
    std::cout << line;
  }
  std::cout << std::endl;
}

}  // namespace

void add_sft_commands(CLI::App& app) {
  struct SftArgs {
    std::string config, model, train_file, task, output, save_format, lr_scheduler;
    int64_t difficulty = 0, steps = 0, batch = 0, token_budget = 0, seed = -1, r = 0, logging = 0, eval_steps = -1;
    double lr = 0;
    bool full = false, keys = false, help_config = false;
    std::vector<std::string> sets;
  };
  auto a = std::make_shared<SftArgs>();
  auto* sft = app.add_subcommand("sft", "Supervised fine-tuning (LoRA or full) on prompt/completion pairs or the arithmetic task");
  sft->add_option("CONFIG", a->config, "Config file (.json, .yaml): the keys of `grpo sft --help-config`");
  sft->add_option("--model", a->model, "Model directory or Hub repo id in the HF cache (model_name_or_path)");
  sft->add_option("--train-file", a->train_file, "JSONL with {\"prompt\", \"completion\"} or chat \"messages\"");
  sft->add_option("--task", a->task, "Built-in task instead of a file")->check(CLI::IsMember({"arith"}));
  sft->add_option("--difficulty", a->difficulty, "Arithmetic task difficulty 1..5 (task_difficulty)");
  sft->add_option("--output", a->output, "Output directory (output_dir)");
  sft->add_flag("--full", a->full, "Full fine-tuning (use_lora: false); saves a checkpoint");
  sft->add_option("--save-format", a->save_format, "auto | checkpoint | adapter");
  sft->add_option("--steps", a->steps, "Optimizer steps (max_steps)");
  sft->add_option("--lr", a->lr, "learning_rate");
  sft->add_option("--lr-scheduler", a->lr_scheduler, "constant | linear | cosine");
  sft->add_option("--batch-size", a->batch, "Examples per step (per_device_train_batch_size)");
  sft->add_option("--token-budget", a->token_budget, "Tokens per packed row");
  sft->add_option("--r", a->r, "LoRA rank");
  sft->add_option("--seed", a->seed, "Seed");
  sft->add_option("--logging-steps", a->logging, "Print a progress line every N steps");
  sft->add_option("--eval-steps", a->eval_steps, "Arithmetic task: greedy accuracy every N steps (0: at the end)");
  sft->add_option("--set", a->sets,
                  "Any config key, after the config file and the options above: --set KEY=VALUE, repeatable "
                  "(VALUE as YAML/JSON: 1e-4, true, [q_proj, v_proj])");
  sft->add_flag("--keys", a->keys, "List the config keys with their defaults (JSON) and exit");
  sft->add_flag("--help-config", a->help_config,
                "List every config key by group (type, range, default, what it does) and exit");
  sft->footer(kExitStatusHelp);
  sft->callback([a] {
    if (a->keys) {
      std::cout << run::SftConfig{}.to_json().dump(2) << std::endl;
      return;
    }
    if (a->help_config) {
      std::cout << grpo::format_config_help(run::sft_config_schema(),
                                            "grpo sft config keys, in a .json/.yaml CONFIG or as --set KEY=VALUE.");
      return;
    }
    run::SftConfig cfg;
    as_usage_errors([&] {  // a bad config file, key or value: exit 2
      if (!a->config.empty()) cfg.apply(grpo::load_config_file(a->config), a->config);
      nlohmann::json o = nlohmann::json::object();
      if (!a->model.empty()) o["model_name_or_path"] = a->model;
      if (!a->train_file.empty()) o["train_file"] = a->train_file;
      if (!a->task.empty()) o["task"] = a->task;
      if (a->difficulty) o["task_difficulty"] = a->difficulty;
      if (!a->output.empty()) o["output_dir"] = a->output;
      if (a->full) o["use_lora"] = false;
      if (!a->save_format.empty()) o["save_format"] = a->save_format;
      if (a->steps) o["max_steps"] = a->steps;
      if (a->lr != 0) o["learning_rate"] = a->lr;
      if (!a->lr_scheduler.empty()) o["lr_scheduler_type"] = a->lr_scheduler;
      if (a->batch) o["per_device_train_batch_size"] = a->batch;
      if (a->token_budget) o["token_budget"] = a->token_budget;
      if (a->r) o["r"] = a->r;
      if (a->seed >= 0) o["seed"] = a->seed;
      if (a->logging) o["logging_steps"] = a->logging;
      if (a->eval_steps >= 0) o["eval_steps"] = a->eval_steps;
      cfg.apply(o, "command line");
      if (!a->sets.empty()) cfg.apply(grpo::parse_set_options(a->sets), "--set");
      cfg.validate(a->config.empty() ? "command line" : a->config);
    });

    std::cout << "sft: " << (cfg.use_lora ? "LoRA r=" + std::to_string(cfg.r) : std::string("full fine-tuning")) << " on "
              << (cfg.task.empty() ? cfg.train_file : "task " + cfg.task) << " -> " << cfg.output_dir << std::endl;
    auto res = run::run_sft(cfg, print_log);
    nlohmann::json summary = {{"output_dir", res.output_dir}, {"format", res.format}, {"steps", res.steps},
                              {"train_examples", res.train_examples}, {"first_loss", res.losses.front()},
                              {"final_loss", res.losses.back()}, {"elapsed_s", res.elapsed_s}};
    if (res.eval_accuracy >= 0) summary["eval_accuracy"] = res.eval_accuracy;
    std::cout << "saved " << res.format << " to " << res.output_dir << std::endl;
    print_json_line(summary.dump());
  });

  struct InitArgs {
    std::string config, tokenizer, output, dtype = "float32";
    uint64_t seed = 0;
  };
  auto b = std::make_shared<InitArgs>();
  auto* init = app.add_subcommand("init-model", "Write a randomly initialised Hugging Face checkpoint with a tokenizer");
  init->add_option("--config", b->config, "Model config.json (model_type llama | qwen2 | qwen3)")->required();
  init->add_option("--tokenizer", b->tokenizer, "Directory with tokenizer.json (+ tokenizer_config.json, generation_config.json)")->required();
  init->add_option("--output", b->output, "Output directory")->required();
  init->add_option("--seed", b->seed, "Seed of the random initialisation");
  init->add_option("--dtype", b->dtype, "Stored dtype")->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  init->callback([b] {
    auto r = run::init_model(b->config, b->tokenizer, b->output, b->seed, b->dtype);
    std::cout << "initialised " << format_count(static_cast<double>(r.parameters)) << " parameters (vocab "
              << r.vocab_size << ", tokenizer " << r.tokenizer_vocab << ") in " << b->output << std::endl;
    print_json_line(nlohmann::json({{"output_dir", b->output}, {"parameters", r.parameters}, {"vocab_size", r.vocab_size},
                                    {"tokenizer_vocab", r.tokenizer_vocab}}).dump());
  });
}

}  // namespace grpo::cli
