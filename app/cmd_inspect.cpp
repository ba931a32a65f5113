// `grpo inspect model|logits|tokenize|chat|dataset`.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/common/error.h"
#include "core/common/files.h"
#include "core/common/strings.h"
#include "core/hub/hf_cache.h"
#include "core/model/inspect.h"
#include "core/rollout/dataset_source.h"
#include "tools/chat_command.h"
#include "tools/tokenize_command.h"

namespace grpo::cli {

std::vector<int64_t> parse_id_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> ids;
  for (const auto& part : split(text, ',')) {
    std::string t = trim(part);
    if (t.empty()) continue;
    try {
      size_t used = 0;
      ids.push_back(std::stoll(t, &used));
      if (used != t.size()) throw std::invalid_argument(t);
    } catch (const std::exception&) {
      throw Error(option, "'" + t + "' is not an integer token id", "use e.g. " + option + " 1,2,3");
    }
  }
  check(!ids.empty(), option, "no token ids given", "use e.g. " + option + " 1,2,3");
  return ids;
}

void print_json_line(const std::string& json) { std::cout << json << std::endl; }

CLI::Validator model_path_transform(const std::string& revision) {
  return CLI::Validator(
      [revision](std::string& value) {
        if (!file_exists(value)) value = hub::resolve_model_dir(value, revision);
        return std::string();
      },
      "DIR|REPO_ID");
}

void add_inspect_commands(CLI::App& app) {
  auto* inspect = app.add_subcommand("inspect", "Inspect models, logits and tokenizers");
  inspect->require_subcommand(1);

  struct ModelArgs { std::string dir, revision = "main"; bool json = false; };
  auto m = std::make_shared<ModelArgs>();
  auto* model = inspect->add_subcommand("model", "Architecture, sizes, parameter count and dtype of a model");
  model->add_option("DIR", m->dir, "Hugging Face model directory, or a Hub repo id in the HF cache")->required();
  model->add_option("--revision", m->revision, "With a repo id: branch, tag or commit (default main)");
  model->add_flag("--json", m->json, "Print JSON instead of text");
  model->callback([m] {
    auto info = model::inspect_model(file_exists(m->dir) ? m->dir : hub::resolve_model_dir(m->dir, m->revision));
    if (m->json) print_json_line(info.dump());
    else std::cout << model::format_model_summary(info);
  });

  struct LogitsArgs { std::string model, ids, adapter; bool last = false; };
  auto l = std::make_shared<LogitsArgs>();
  auto* logits = inspect->add_subcommand("logits", "Print fp32 logits of a token sequence as JSON");
  logits->add_option("--model", l->model, "Hugging Face model directory or Hub repo id")->required()->transform(model_path_transform());
  logits->add_option("--ids", l->ids, "Comma-separated token ids, e.g. 1,2,3")->required();
  logits->add_option("--adapter", l->adapter, "PEFT LoRA adapter directory");
  logits->add_flag("--last", l->last, "Only the last position's logits");
  logits->callback([l] {
    auto rows = model::compute_logits(l->model, parse_id_list(l->ids, "--ids"), l->adapter, l->last);
    print_json_line(nlohmann::json{{"logits", rows}}.dump());
  });

  auto t = std::make_shared<text::TokenizeOptions>();
  auto* tok = inspect->add_subcommand("tokenize", "Encode stdin lines to JSON id arrays (or --decode / --chat)");
  tok->add_option("--tokenizer", t->tokenizer, "tokenizer.json, a directory holding it, or a Hub repo id in the cache")
      ->required()
      ->transform(model_path_transform());
  tok->add_flag("--add-special", t->add_special, "Add special tokens as Tokenizer.encode does by default");
  tok->add_flag("--decode", t->decode, "Read JSON id arrays, print the decoded text");
  tok->add_flag("--skip-special", t->skip_special, "With --decode: drop special tokens");
  tok->add_flag("--chat", t->chat, "Read a JSON messages array, print the chat-templated ids");
  tok->callback([t] { text::run_tokenize(*t, std::cin, std::cout); });

  auto c = std::make_shared<text::ChatCommandOptions>();
  auto* chat = inspect->add_subcommand(
      "chat", "Render stdin conversations (JSON lines) with the model's chat template; one JSON string or {\"error\"} a line");
  chat->add_option("--tokenizer", c->tokenizer, "Model directory (tokenizer.json, tokenizer_config.json) or a Hub repo id in the cache")
      ->required()
      ->transform(model_path_transform());
  chat->add_flag("--add-generation-prompt", c->add_generation_prompt,
                 "Default for lines that do not set \"add_generation_prompt\" (else false, as transformers)");
  chat->callback([c] { text::run_chat(*c, std::cin, std::cout); });

  struct DatasetArgs {
    rollout::DatasetRef ref;
    std::string columns;
    int64_t head = 10;
    bool files = false;
  };
  auto d = std::make_shared<DatasetArgs>();
  auto* dataset = inspect->add_subcommand(
      "dataset", "Print a dataset's rows as JSON lines (keys in the file's column order): a .parquet/.jsonl/.csv "
                 "file, a folder laid out like a Hub dataset repo, or a dataset repo id in the HF cache");
  dataset->add_option("DATASET", d->ref.name, "File, folder, or Hub dataset repo id (org/name)")->required();
  dataset->add_option("--config", d->ref.config, "The dataset's config (default: its default config)");
  dataset->add_option("--split", d->ref.split, "The split (default train)");
  dataset->add_option("--revision", d->ref.revision, "With a repo id: branch, tag, commit or refs/convert/parquet (default main)");
  dataset->add_option("--columns", d->columns, "Renames as a JSON object, e.g. '{\"question\": \"prompt\"}'");
  dataset->add_option("--head", d->head, "Rows to print (default 10; 0 = all)")->check(CLI::NonNegativeNumber);
  dataset->add_flag("--files", d->files, "Print the split's data files instead of rows");
  dataset->callback([d] {
    if (!d->columns.empty()) {
      d->ref.columns = nlohmann::json::parse(d->columns, nullptr, false);
      check(!d->ref.columns.is_discarded(), "--columns", "not valid JSON", "e.g. --columns '{\"question\": \"prompt\"}'");
      rollout::validate_column_map(d->ref.columns, "--columns");
    }
    if (d->files) {
      for (const auto& f : rollout::dataset_files(d->ref)) std::cout << f << "\n";
      return;
    }
    int64_t printed = 0;
    rollout::for_each_dataset_row(d->ref, [&](nlohmann::ordered_json&& row, const std::string&) {
      std::cout << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return d->head == 0 || ++printed < d->head;
    });
    std::cout.flush();
  });
}

}  // namespace grpo::cli
