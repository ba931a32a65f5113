// `grpo bench ...`: each benchmark prints its figures last as one JSON line.
#include <CLI/CLI.hpp>

#include <memory>

#include "app/commands.h"
#include "tools/grpo_step_bench.h"
#include "tools/parquet_bench.h"
#include "tools/forward_bench.h"
#include "tools/nodes_bench.h"
#include "tools/generate_bench.h"
#include "tools/tokenizer_bench.h"

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

  struct ParquetArgs { std::string file, node_dir = "tests/bench"; int passes = 5; };
  auto pq = std::make_shared<ParquetArgs>();
  auto* par = bench->add_subcommand("parquet", "Parquet read rows/s and MB/s vs hyparquet (Node) on the same file");
  par->add_option("file", pq->file, "Parquet file (make one: node tests/bench/make_parquet_bench_file.mjs OUT.parquet)")->required();
  par->add_option("--node-dir", pq->node_dir, "Folder with parquet_bench.mjs and its node_modules");
  par->add_option("--passes", pq->passes, "Timed full reads per reader (median reported)");
  par->callback([pq] { print_json_line(io::bench_parquet(pq->file, pq->node_dir, pq->passes).dump()); });

  auto f = std::make_shared<model::ForwardBenchOptions>();
  auto* fwd = bench->add_subcommand("forward", "Prefill and LoRA forward+backward tokens/s, GEMM peak, MFU");
  fwd->add_option("--model", f->model_dir, "Hugging Face model directory or Hub repo id")
      ->transform(model_path_transform());
  fwd->add_option("--size", f->size, "Generated model size instead of --model (tiny, 25m, 100m)");
  fwd->add_option("--seq-len", f->seq_len, "Sequence length");
  fwd->add_option("--batch", f->batch, "Batch size");
  fwd->add_option("--lora-r", f->lora_r, "LoRA rank (all-linear)");
  fwd->add_option("--threads", f->threads, "Intra-op threads (0 = LibTorch's default)");
  fwd->add_option("--iters", f->iters, "Timed iterations (median reported)");
  fwd->add_option("--device", f->device, "cpu or cuda");
  fwd->add_option("--dtype", f->dtype, "float32 or bfloat16 (default: fp32 on CPU, bf16 on CUDA)");
  fwd->callback([f] { print_json_line(model::bench_forward(*f).dump()); });

  auto nd = std::make_shared<model::NodesBenchOptions>();
  auto* nodes = bench->add_subcommand("nodes", "Each fused node (LoRA groups, RMSNorm, SwiGLU) against its LibTorch composite, fwd+bwd, checked");
  nodes->add_option("--rows", nd->rows, "Tokens (rows of every input)");
  nodes->add_option("--hidden", nd->hidden, "hidden_size");
  nodes->add_option("--intermediate", nd->intermediate, "intermediate_size");
  nodes->add_option("--q-dim", nd->q_dim, "Query width (heads x head_dim)");
  nodes->add_option("--kv-dim", nd->kv_dim, "Key/value width (kv heads x head_dim)");
  nodes->add_option("--lora-r", nd->lora_r, "LoRA rank");
  nodes->add_option("--threads", nd->threads, "LibTorch's and OpenBLAS's threads (0 = leave both as they are)");
  nodes->add_option("--iters", nd->iters, "Timed runs of each side, interleaved (median reported)");
  nodes->callback([nd] { print_json_line(model::bench_nodes(*nd).dump()); });

  auto g = std::make_shared<rollout::GenerateBenchOptions>();
  auto* gen = bench->add_subcommand("generate", "Sampler tokens/s for G samples per prompt, with and without prefix sharing");
  gen->add_option("--model", g->model_dir, "Hugging Face model directory or Hub repo id")
      ->transform(model_path_transform());
  gen->add_option("--size", g->size, "Generated model size instead of --model (tiny, 25m, 100m)");
  gen->add_option("--prompts", g->prompts, "Prompts (P)");
  gen->add_option("--group", g->group, "Samples per prompt (G)");
  gen->add_option("--prompt-min", g->prompt_min, "Shortest prompt (tokens)");
  gen->add_option("--prompt-max", g->prompt_max, "Longest prompt (tokens)");
  gen->add_option("--max-tokens", g->max_tokens, "New tokens per completion (no stop tokens)");
  gen->add_option("--temperature", g->temperature, "Sampling temperature");
  gen->add_option("--threads", g->threads, "Intra-op threads (0 = LibTorch's default)");
  gen->add_option("--device", g->device, "cpu, cuda or cuda:N (CUDA computes in bf16)");
  gen->add_option("--iters", g->iters, "Timed repeats per mode (median reported)");
  gen->callback([g] { print_json_line(rollout::bench_generate(*g).dump()); });

  auto s = std::make_shared<::grpo::grpo::GrpoStepBenchOptions>();
  auto* step = bench->add_subcommand("grpo-step", "One GRPO optimizer step: our trainer vs PyTorch eager (TRL's math), checked");
  step->add_option("--model", s->model_dir, "Hugging Face model directory or Hub repo id")
      ->transform(model_path_transform());
  step->add_option("--size", s->size, "Generated model size instead of --model (tiny, 25m, 100m)");
  step->add_option("--prompts", s->prompts, "Prompts per step");
  step->add_option("--group", s->group, "Samples per prompt (G)");
  step->add_option("--prompt-min", s->prompt_min, "Shortest prompt (tokens)");
  step->add_option("--prompt-max", s->prompt_max, "Longest prompt (tokens)");
  step->add_option("--completion-min", s->completion_min, "Shortest completion (tokens)");
  step->add_option("--completion-max", s->completion_max, "Longest completion (tokens)");
  step->add_option("--token-budget", s->token_budget, "Our packed-row token budget (0 = fixed-count micro-batches)");
  step->add_option("--row-layout", s->row_layout, "Our row layout: auto (segments on a CPU), segments (one forward, attention per sample), separate (a forward per sub-row) or padded (one block)")
      ->check(CLI::IsMember({"auto", "segments", "separate", "padded"}));
  step->add_option("--share-prompts", s->share_prompts,
                   "Ours: a group's completions share one forward of its prompt (true, the default) or each forwards its own copy (false, as the baseline)");
  step->add_option("--per-device-train-batch-size", s->per_device_train_batch_size, "Python micro-batch size (samples)");
  step->add_option("--lora-r", s->lora_r, "LoRA rank (all-linear)");
  step->add_option("--lora-alpha", s->lora_alpha, "LoRA alpha");
  step->add_option("--learning-rate", s->learning_rate, "AdamW learning rate");
  step->add_option("--temperature", s->temperature, "Temperature of the log-probs");
  step->add_option("--loss-type", s->loss_type, "TRL's loss_type: grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo or vespo");
  step->add_option("--importance-sampling-level", s->importance_sampling_level,
                   "token, sequence or sequence_token (default: token; sequence for luspo)");
  step->add_option("--epsilon", s->epsilon, "Lower clipping range");
  step->add_option("--epsilon-high", s->epsilon_high, "Upper clipping range (cispo: the ratio's cap)");
  step->add_option("--delta", s->delta, "Two-sided clipping cap of the ratio (0: off)");
  step->add_option("--threads", s->threads, "Intra-op threads for both sides (0 = LibTorch's default)");
  step->add_option("--device", s->device, "cpu, cuda or cuda:N for both sides (fp32, TF32 off)");
  step->add_option("--iters", s->iters, "Timed steps after the checked warm-up step (median reported)");
  step->add_option("--python", s->python, "Python interpreter with torch");
  step->add_option("--script", s->script, "The baseline script (tests/bench/grpo_step_baseline.py)");
  step->add_flag("--keep-files", s->keep_files, "Keep the temporary model/batch folder");
  step->add_option("--trace", s->trace, "Write LibTorch's profiler trace of our last timed step to this file (chrome://tracing JSON)");
  step->callback([s] { print_json_line(::grpo::grpo::bench_grpo_step(*s).dump()); });
}

}  // namespace grpo::cli
