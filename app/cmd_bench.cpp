// `grpo bench ...`: each benchmark prints its figures last as one JSON line.
#include <CLI/CLI.hpp>

#include <memory>

#include "app/commands.h"
#include "core/model/forward_bench.h"
#include "core/text/tokenizer_bench.h"

namespace grpo::cli {

void add_bench_commands(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Benchmarks; each prints its figures last as one JSON line");
  bench->require_subcommand(1);

  struct TokArgs { std::string tokenizer, node_dir = "tests/bench"; };
  auto t = std::make_shared<TokArgs>();
  auto* tok = bench->add_subcommand("tokenize", "Tokenizer load time and encode MB/s vs Hugging Face tokenizers");
  tok->add_option("--tokenizer", t->tokenizer, "tokenizer.json or a directory holding it")->required();
  tok->add_option("--node-dir", t->node_dir, "Folder with tokenizers_bench.mjs and its node_modules");
  tok->callback([t] { print_json_line(text::bench_tokenize(t->tokenizer, t->node_dir).dump()); });

  auto f = std::make_shared<model::ForwardBenchOptions>();
  auto* fwd = bench->add_subcommand("forward", "Prefill and LoRA forward+backward tokens/s, GEMM peak, MFU");
  fwd->add_option("--model", f->model_dir, "Hugging Face model directory");
  fwd->add_option("--size", f->size, "Generated model size instead of --model (tiny, 25m, 100m)");
  fwd->add_option("--seq-len", f->seq_len, "Sequence length");
  fwd->add_option("--batch", f->batch, "Batch size");
  fwd->add_option("--lora-r", f->lora_r, "LoRA rank (all-linear)");
  fwd->add_option("--threads", f->threads, "Intra-op threads (0 = LibTorch's default)");
  fwd->add_option("--iters", f->iters, "Timed iterations (median reported)");
  fwd->add_option("--device", f->device, "cpu or cuda");
  fwd->add_option("--dtype", f->dtype, "float32 or bfloat16 (default: fp32 on CPU, bf16 on CUDA)");
  fwd->callback([f] { print_json_line(model::bench_forward(*f).dump()); });
}

}  // namespace grpo::cli
