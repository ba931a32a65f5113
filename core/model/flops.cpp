#include "core/model/flops.h"

#include <algorithm>
#include <chrono>

#include "core/model/causal_lm.h"

namespace grpo::model {

double ModelFlops::forward(int64_t len, int64_t head_tokens) const {
  const double L = double(len), H = double(head_tokens);
  return 2 * body * L + 2 * head * H + 2 * lora * L + attn * L * L;
}

double ModelFlops::lora_fwd_bwd(int64_t len, int64_t head_tokens) const {
  return lora_fwd_bwd(len, head_tokens, double(len) * double(len));
}

double ModelFlops::lora_fwd_bwd(int64_t len, int64_t head_tokens, double pairs) const {
  const double L = double(len), H = double(head_tokens);
  return 4 * body * L + 4 * head * H + 6 * lora * L + 3 * attn * pairs;
}

double ModelFlops::full_fine_tune(int64_t len) const {
  const double L = double(len);
  return 6 * (body + head) * L + 3 * attn * L * L;
}

ModelFlops count_flops(const CausalLMImpl& model) {
  const auto& c = model.config();
  ModelFlops f;
  for (const auto& [name, lin] : model.linear_layers()) {
    const double in = double(lin->options().in_features()), out = double(lin->options().out_features());
    (name == "lm_head" ? f.head : f.body) += in * out;
    if (lin->has_lora()) f.lora += double(lin->lora_rank()) * (in + out);
  }
  if (model.tied()) f.head += double(c.vocab_size) * double(c.hidden_size);
  f.attn = 4.0 * double(c.num_hidden_layers) * double(c.q_dim());
  return f;
}

namespace {
void sync(const torch::Tensor& t) { (void)t.sum().item<double>(); }
}  // namespace

GemmProbe::GemmProbe(torch::Device device, torch::Dtype dtype, int64_t size)
    : n(size > 0 ? size : device.is_cuda() ? 8192 : 1536) {
  torch::NoGradGuard no_grad;
  auto opts = torch::TensorOptions().dtype(dtype).device(device);
  a = torch::randn({n, n}, opts);
  b = torch::randn({n, n}, opts);
  c = torch::empty({n, n}, opts);
}

void GemmProbe::run() {
  torch::NoGradGuard no_grad;
  torch::mm_out(c, a, b);
  sync(c.narrow(0, 0, 1));
}

double measure_gemm_flops(torch::Device device, torch::Dtype dtype, int reps, int64_t n) {
  GemmProbe probe(device, dtype, n);
  probe.run();  // warm-up: allocation, BLAS threads, cuBLAS handles
  double best = 1e300;
  for (int i = 0; i < std::max(1, reps); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    probe.run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return probe.flops() / std::max(best, 1e-9);
}

double mfu_peak_flops(double configured_tflops, torch::Device device, torch::Dtype dtype, bool* measured) {
  if (measured) *measured = configured_tflops <= 0;
  if (configured_tflops > 0) return configured_tflops * 1e12;
  return measure_gemm_flops(device, dtype, 3, device.is_cuda() ? 4096 : 1024);
}

}  // namespace grpo::model
