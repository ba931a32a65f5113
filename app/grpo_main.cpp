// grpo: the headless CLI. Parses arguments and calls into core/; no logic lives here.
// Every library error is a grpo::Error, caught once below and printed with its context and hint.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/error.h"
#include "core/common/strings.h"
#include "core/model/forward_bench.h"
#include "core/model/inspect.h"
#include "core/text/tokenize_command.h"
#include "core/text/tokenizer_bench.h"

namespace {

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  for (const auto& part : grpo::split(text, ',')) {
    std::string t = grpo::trim(part);
    if (t.empty()) continue;
    try {
      size_t used = 0;
      ids.push_back(std::stoll(t, &used));
      if (used != t.size()) throw std::invalid_argument(t);
    } catch (const std::exception&) {
      throw grpo::Error("--ids", "'" + t + "' is not an integer token id", "use e.g. --ids 1,2,3");
    }
  }
  grpo::check(!ids.empty(), "--ids", "no token ids given", "use e.g. --ids 1,2,3");
  return ids;
}

// Prints a JSON value as the last line, so scripts can read a command's figures.
void print_json_line(const nlohmann::json& j) { std::cout << j.dump() << std::endl; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GRPO Studio: asynchronous GRPO fine-tuning of LoRA adapters for Hugging Face models"};
  app.set_version_flag("--version", std::string("grpo ") + GRPO_VERSION);
  app.require_subcommand(1);

  // ---- grpo inspect ----
  auto* inspect = app.add_subcommand("inspect", "Inspect models, logits and tokenizers");
  inspect->require_subcommand(1);

  std::string model_dir;
  bool model_json = false;
  auto* inspect_model = inspect->add_subcommand("model", "Architecture, sizes, parameter count and dtype of a model");
  inspect_model->add_option("DIR", model_dir, "Hugging Face model directory")->required();
  inspect_model->add_flag("--json", model_json, "Print JSON instead of text");

  std::string logits_model, logits_ids, logits_adapter;
  bool logits_last = false;
  auto* inspect_logits = inspect->add_subcommand("logits", "Print fp32 logits of a token sequence as JSON");
  inspect_logits->add_option("--model", logits_model, "Hugging Face model directory")->required();
  inspect_logits->add_option("--ids", logits_ids, "Comma-separated token ids, e.g. 1,2,3")->required();
  inspect_logits->add_option("--adapter", logits_adapter, "PEFT LoRA adapter directory");
  inspect_logits->add_flag("--last", logits_last, "Only the last position's logits");

  grpo::text::TokenizeOptions tok;
  auto* inspect_tok = inspect->add_subcommand(
      "tokenize", "Encode stdin lines to JSON id arrays (or --decode / --chat)");
  inspect_tok->add_option("--tokenizer", tok.tokenizer, "tokenizer.json or a directory holding it")->required();
  inspect_tok->add_flag("--add-special", tok.add_special, "Add special tokens as Tokenizer.encode does by default");
  inspect_tok->add_flag("--decode", tok.decode, "Read JSON id arrays, print the decoded text");
  inspect_tok->add_flag("--skip-special", tok.skip_special, "With --decode: drop special tokens");
  inspect_tok->add_flag("--chat", tok.chat, "Read a JSON messages array, print the chat-templated ids");

  // ---- grpo bench ----
  auto* bench = app.add_subcommand("bench", "Benchmarks; each prints its figures last as one JSON line");
  bench->require_subcommand(1);

  std::string bench_tokenizer, bench_node_dir = "tests/bench";
  auto* bench_tok = bench->add_subcommand("tokenize", "Tokenizer load time and encode MB/s vs Hugging Face tokenizers");
  bench_tok->add_option("--tokenizer", bench_tokenizer, "tokenizer.json or a directory holding it")->required();
  bench_tok->add_option("--node-dir", bench_node_dir, "Folder with tokenizers_bench.mjs and its node_modules");

  grpo::model::ForwardBenchOptions fwd;
  auto* bench_fwd = bench->add_subcommand("forward", "Prefill and LoRA forward+backward tokens/s, GEMM peak, MFU");
  bench_fwd->add_option("--model", fwd.model_dir, "Hugging Face model directory");
  bench_fwd->add_option("--size", fwd.size, "Generated model size instead of --model, e.g. 25m");
  bench_fwd->add_option("--seq-len", fwd.seq_len, "Sequence length");
  bench_fwd->add_option("--batch", fwd.batch, "Batch size");
  bench_fwd->add_option("--lora-r", fwd.lora_r, "LoRA rank (all-linear)");
  bench_fwd->add_option("--threads", fwd.threads, "Intra-op threads (0 = all cores)");
  bench_fwd->add_option("--iters", fwd.iters, "Timed iterations (median reported)");
  bench_fwd->add_option("--device", fwd.device, "cpu or cuda");
  bench_fwd->add_option("--dtype", fwd.dtype, "float32 or bfloat16 (default: fp32 on CPU, bf16 on CUDA)");

  CLI11_PARSE(app, argc, argv);

  try {
    if (*inspect_model) {
      auto info = grpo::model::inspect_model(model_dir);
      if (model_json) print_json_line(info);
      else std::cout << grpo::model::format_model_summary(info);
    } else if (*inspect_logits) {
      auto rows = grpo::model::compute_logits(logits_model, parse_ids(logits_ids), logits_adapter, logits_last);
      print_json_line(nlohmann::json{{"logits", rows}});
    } else if (*inspect_tok) {
      grpo::text::run_tokenize(tok, std::cin, std::cout);
    } else if (*bench_tok) {
      print_json_line(grpo::text::bench_tokenize(bench_tokenizer, bench_node_dir));
    } else if (*bench_fwd) {
      print_json_line(grpo::model::bench_forward(fwd));
    }
  } catch (const grpo::Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
