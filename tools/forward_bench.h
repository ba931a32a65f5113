// `grpo bench forward`: prefill and LoRA forward+backward throughput of a model (a checkpoint or a
// generated size), measured against this machine's own fp32 GEMM rate in the same run.
//
// FLOPs per token: core/model/flops.h (the same accounting as the engine's perf/mfu_* metrics).
// mfu = lora_fwd_bwd_tok_s * (LoRA fwd+bwd FLOPs per token) / (gemm_gflops * 1e9).
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "core/io/hf_config.h"

namespace grpo::model {

// The device a benchmark's --device names ("cpu", "cuda", "cuda:N"); an error that says why when
// it is malformed or this LibTorch sees no CUDA device. Shared by bench forward, generate and grpo-step.
c10::Device bench_device(const std::string& name, const std::string& context);

struct ForwardBenchOptions {
  std::string model_dir;      // a checkpoint; empty = generate `size`
  std::string size = "25m";   // "tiny" | "25m" | "100m"
  int64_t seq_len = 512;
  int64_t batch = 1;
  int64_t lora_r = 16;        // all-linear, lora_alpha = 2r
  int threads = 0;            // 0 = auto: LibTorch's default or 1, whichever prefills faster
  int iters = 3;              // timed repeats (median), after one warm-up
  std::string device = "cpu"; // "cpu" | "cuda"
  std::string dtype;          // "" = default for the device (fp32 CPU, bf16 CUDA) | float32 | bfloat16
};

// A Qwen2-style config for a named size (throws grpo::Error listing the known sizes).
io::ModelConfig bench_model_config(const std::string& size);

// Keys: gemm_gflops, prefill_tok_s, lora_fwd_bwd_tok_s, mfu, params, lora_params, seq_len, batch,
// threads, flops_per_token_fwd, flops_per_token_lora_fwd_bwd, flops_per_token_full_ft,
// prefill_s, lora_fwd_bwd_s, model, device, dtype, blas (the BLAS and its kernel set: blas_kernels.h).
nlohmann::json bench_forward(const ForwardBenchOptions& options);

}  // namespace grpo::model
