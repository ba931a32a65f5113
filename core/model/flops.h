// Model FLOPs of the LoRA training step and the device's attainable dense GEMM rate: what MFU
// (the engine's perf/mfu_* metrics, `grpo bench forward`) divides. Matmul FLOPs only (norms,
// activations and the softmax are left out), counted per token as the step executes them:
//   body = sum of in*out over the decoder's projections
//   head = vocab*hidden, the LM head (tied or not)
//   lora = sum of r*(in+out) over the adapted projections
//   attn = 4*layers*q_dim, attention (q k^T and p v) of one query against one key, forward,
//          counted over the full L x L square as the packed forward computes it (a segmented
//          row: each segment's Lq x Lk, model/segments.h)
// One sequence of L tokens, H of which reach the LM head:
//   forward      = 2*body*L + 2*head*H + 2*lora*L + attn*L*L
//   LoRA fwd+bwd = 4*body*L + 4*head*H + 6*lora*L + 3*attn*L*L
//     (the frozen base computes input gradients only, no weight gradients; attention's backward
//      is twice its forward; a recomputed forward under gradient checkpointing is not counted:
//      model FLOPs, not hardware FLOPs)
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace grpo::model {

class CausalLMImpl;

struct ModelFlops {
  double body = 0, head = 0, lora = 0, attn = 0;

  double forward(int64_t len, int64_t head_tokens) const;
  double lora_fwd_bwd(int64_t len, int64_t head_tokens) const;
  // The same for tokens whose attention covers `pairs` (query, key) pairs instead of len^2 (a
  // segmented row: model/segments.h, segment_pairs).
  double lora_fwd_bwd(int64_t len, int64_t head_tokens, double pairs) const;
  double full_fine_tune(int64_t len) const;  // 6*(body+head)*L + 3*attn*L*L, the "6N" rule
};

ModelFlops count_flops(const CausalLMImpl& model);

// One square matrix product on `device` in `dtype`, repeatable: the machine's attainable GEMM rate
// (size n; 0 = 8192 on CUDA, 1536 on a CPU).
struct GemmProbe {
  GemmProbe(torch::Device device, torch::Dtype dtype, int64_t n = 0);
  void run();  // one product, synchronised
  double flops() const { return 2.0 * double(n) * double(n) * double(n); }
  int64_t n;
  torch::Tensor a, b, c;
};

// FLOP/s of the best of `reps` products after one warm-up, with size n as in GemmProbe: the peak MFU
// divides by when no datasheet figure is given (TrainConfig::mfu_peak_tflops).
double measure_gemm_flops(torch::Device device, torch::Dtype dtype, int reps = 3, int64_t n = 0);

// The peak MFU divides by, FLOP/s: `configured_tflops` when > 0 (a datasheet figure), else a short
// measurement at a run's start (size 1024 on a CPU, 4096 on CUDA: well under a second even on
// reference BLAS). *measured says which.
double mfu_peak_flops(double configured_tflops, torch::Device device, torch::Dtype dtype, bool* measured = nullptr);

}  // namespace grpo::model
